"""Parsers of docker inspect, sinfo and squeue output (recorded from a small testbed)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from malleable.testbed.info import (
    Container,
    SiteStatus,
    TestbedStatus,
    count_states,
    parse_inspect,
    parse_sinfo,
    parse_squeue,
)

DATA = Path(__file__).resolve().parents[1] / "data" / "testbed"


def test_parse_recorded_inspect() -> None:
    found = {c.hostname: c for c in parse_inspect((DATA / "inspect.json").read_text())}
    assert set(found) == {"vu-ctl", "vu-c1", "slurmdbd"}
    ctl = found["vu-ctl"]
    assert (ctl.role, ctl.site, ctl.state, ctl.health) == ("controller", "vu", "running",
                                                           "healthy")
    assert ctl.ssh_port == 32770 and ctl.address == "172.19.0.7"
    assert ctl.healthy and ctl.running
    compute = found["vu-c1"]
    assert compute.ssh_port is None
    assert set(compute.aliases) == {"vu-c1", "vu-n003", "vu-n004"}
    assert found["slurmdbd"].site is None and found["slurmdbd"].role == "accounting"


def test_unhealthy_and_stopped_containers() -> None:
    doc = json.loads((DATA / "inspect.json").read_text())
    doc[0]["State"] = {"Status": "exited", "Running": False, "Health": {"Status": "unhealthy"}}
    doc[1]["State"]["Health"]["Status"] = "starting"
    doc[1]["NetworkSettings"]["Networks"] = {}
    first, second, _ = parse_inspect(json.dumps(doc))
    assert not first.running and not first.healthy
    assert second.running and not second.healthy and second.address is None


def test_parse_sinfo_and_count() -> None:
    states = parse_sinfo((DATA / "sinfo.txt").read_text())
    assert states == {f"vu-n00{i}": "idle" for i in range(1, 5)}
    mixed = parse_sinfo("a-n1 allocated\na-n2 down*\na-n3 idle\na-n1 allocated\n\nbad line x\n")
    assert mixed == {"a-n1": "allocated", "a-n2": "down*", "a-n3": "idle"}
    assert count_states(mixed) == {"allocated": 1, "down*": 1, "idle": 1}


def test_parse_squeue() -> None:
    assert parse_squeue("12 RUNNING\n13 PENDING\n") == {"12": "RUNNING", "13": "PENDING"}
    assert parse_squeue("") == {}


def test_status_json_has_sites_keyed_by_name() -> None:
    site = SiteStatus("vu", "vu-ctl", "running", "healthy", 4, {"idle": 3, "allocated": 1}, 1,
                      None)
    status = TestbedStatus("t", "malleable-t", "small", False, {"vu": site},
                           (Container("id", "vu-ctl", "controller", "vu", "running", "healthy",
                                      "10.0.0.2", 4000),))
    doc = status.to_json()
    assert doc["sites"]["vu"]["idle"] == 3 and doc["sites"]["vu"]["jobs"] == 1
    assert doc["idle_nodes"] == 3 and doc["controllers_up"] == 1
    assert doc["containers"][0]["ssh_port"] == 4000
    assert json.loads(json.dumps(doc)) == doc


def test_parse_version() -> None:
    from malleable.testbed.info import parse_version

    assert parse_version("slurm 22.05.8\n") == "22.05.8"
    assert parse_version("slurm-wlm 26.05.5\n") == "26.05.5"
    assert parse_version("") == "" and parse_version("sinfo: error\n") == ""


def test_status_table_prints_each_sites_kind(capsys: pytest.CaptureFixture[str]) -> None:
    from malleable.commands.testbed import print_status

    slurm = SiteStatus("vu", "vu-ctl", "running", "healthy", 4, {"idle": 4}, 0, None)
    oar = SiteStatus("grid", "grid-ctl", "running", "healthy", 4, {"idle": 4}, 0, None,
                     kind="oar")
    print_status(TestbedStatus("t", "malleable-t", "mixed", True, {"vu": slurm, "grid": oar}))
    rows = {line.split("│")[1].strip(): line.split("│")[2].strip()
            for line in capsys.readouterr().out.splitlines()
            if line.count("│") > 3 and line.split("│")[1].strip() in ("vu", "grid")}
    assert rows == {"vu": "slurm", "grid": "oar"}
