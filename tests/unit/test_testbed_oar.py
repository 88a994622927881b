"""The OAR site kind of the testbed: topology, compose, settings, clusters config."""

from __future__ import annotations

from pathlib import Path

import pytest

from malleable.config import parse_config
from malleable.errors import InputError
from malleable.testbed.clusters import render_clusters_toml
from malleable.testbed.compose import compose_project
from malleable.testbed.info import SiteEndpoint
from malleable.testbed.oarconf import count_jobs, node_ssh_names, parse_node_states, render_settings
from malleable.testbed.state import Record
from malleable.testbed.topology import DAS3, DAS3_MIXED, Site, Topology, parse_topology
from tests.unit.test_testbed_compose import homes

OAR = Site("grid", 5, 2, kind="oar")
DATA = Path(__file__).resolve().parents[1] / "data" / "oar"


def test_das3_mixed_has_the_das3_sizes_three_slurm_and_two_oar_sites() -> None:
    assert [s.nodes for s in DAS3_MIXED.sites] == [s.nodes for s in DAS3.sites]
    assert [s.kind for s in DAS3_MIXED.sites] == ["slurm"] * 3 + ["oar"] * 2
    scaled = DAS3_MIXED.scaled(0.1)
    assert [s.kind for s in scaled.sites] == [s.kind for s in DAS3_MIXED.sites]


def test_kind_in_a_topology_file_and_a_bad_kind() -> None:
    topo = parse_topology('[sites.a]\nnodes = 4\nkind = "oar"\n[sites.b]\nnodes = 2\n')
    assert [(s.name, s.kind) for s in topo.sites] == [("a", "oar"), ("b", "slurm")]
    with pytest.raises(InputError, match="kind must be one of slurm, oar"):
        parse_topology('[sites.a]\nnodes = 4\nkind = "pbs"\n')


def test_an_oar_only_testbed_has_no_accounting_service(tmp_path: Path) -> None:
    topo = Topology("o", (OAR,))
    doc = compose_project(topo, "t", "img", tmp_path)
    assert sorted(doc["services"]) == ["grid-c0", "grid-c1", "grid-ctl"]
    assert topo.total_containers == 3
    assert doc["volumes"] == {"grid-home": {}}


def test_oar_site_services(tmp_path: Path) -> None:
    doc = compose_project(Topology("m", (Site("vu", 2), OAR)), "t", "img", tmp_path)
    services = doc["services"]
    ctl, c0, c1 = services["grid-ctl"], services["grid-c0"], services["grid-c1"]
    assert ctl["command"] == ["oar-server", "grid", *OAR.node_names()]
    assert ctl["ports"] == ["127.0.0.1::22"]
    assert ctl["depends_on"] == {"grid-c0": {"condition": "service_healthy"},
                                 "grid-c1": {"condition": "service_healthy"}}
    assert c0["command"] == ["oar-node", "grid"]
    assert c0["networks"]["default"]["aliases"] == ["grid-n001", "grid-n002", "grid-n003"]
    assert c1["networks"]["default"]["aliases"] == ["grid-n004", "grid-n005"]
    for svc in (ctl, c0, c1):
        assert homes(svc) == ["grid-home"]
        assert svc["labels"]["org.malleable.site"] == "grid"
    assert "slurmdbd" in services and homes(services["vu-c0"]) == ["vu-home"]


def test_settings_point_at_the_server_and_disable_cpusets() -> None:
    text = render_settings(OAR, "pw1", "pw2")
    lines = text.splitlines()
    assert 'DB_HOSTNAME="grid-ctl"' in lines and 'SERVER_HOSTNAME="grid-ctl"' in lines
    assert 'DB_BASE_PASSWD="pw1"' in lines and 'DB_BASE_PASSWD_RO="pw2"' in lines
    assert 'WALLTIME_CHANGE_ENABLED="yes"' in lines and "-CPUSET_PATH" in lines
    # a node dying under a job turns Suspected (the adapter's dead-node handling needs it)
    assert 'CHECK_NODES_WITH_RUNNING_JOB="yes"' in lines and 'FINAUD_FREQUENCY="30"' in lines
    assert node_ssh_names(OAR)[0] == "[grid-n001]:6667"


def test_node_states_and_jobs_from_recorded_output() -> None:
    states = parse_node_states((DATA / "oarnodes-busy.json").read_text())
    assert states == {f"oar-n00{i}": "alive" for i in range(1, 5)}
    assert count_jobs((DATA / "oarstat-running-waiting.json").read_text()) == 3
    assert count_jobs("") == 0


def test_record_keeps_the_kind() -> None:
    rec = Record("t", "malleable-t", DAS3_MIXED, "img")
    assert Record.from_json(rec.to_json()).topology == DAS3_MIXED


def test_clusters_config_of_an_oar_site_is_accepted() -> None:
    ep = SiteEndpoint("grid", "", "grid-ctl", "127.0.0.1", 2222, "172.19.0.3", "malleable",
                      "/k", "/kh", 5, "", ("grid-c0",), kind="oar")
    text = render_clusters_toml("t", [ep])
    assert 'kind = "oar"' in text and "partition" not in text and "slurm_cluster" not in text
    import tomllib
    config = parse_config(tomllib.loads(text))
    assert config.site("grid").kind == "oar" and config.site("grid").ssh is not None
    assert config.site("grid").command_timeout == 120  # OAR's perl tools, on a loaded machine
