"""The compose project: no fixed names or subnets, start order, what is published."""

from __future__ import annotations

import json
import socket
from pathlib import Path
from typing import Any

import pytest

from malleable.errors import InputError
from malleable.testbed.bringup import free_ports
from malleable.testbed.compose import check_name, compose_project, project_name
from malleable.testbed.topology import DAS3, SMALL


def test_services_of_the_small_topology(tmp_path: Path) -> None:
    doc = compose_project(SMALL, "t1", "img:1", tmp_path)
    services = doc["services"]
    assert sorted(services) == sorted(["slurmdbd", "vu-ctl", "vu-c0", "vu-c1", "uva-ctl",
                                       "uva-c0", "uva-c1"])
    for name, svc in services.items():
        assert svc["hostname"] == name
        assert "container_name" not in svc
        assert svc["image"] == "img:1"
        assert svc["init"] is True
        assert svc["labels"]["org.malleable.testbed"] == "t1"
        assert svc["healthcheck"]["test"] == ["CMD", "/usr/local/sbin/testbed-healthcheck"]
        assert f"{tmp_path / 'secrets'}:/testbed/secrets:ro" in svc["volumes"]
    assert "networks" not in doc  # compose makes the project's network; no fixed subnet


def test_only_controllers_publish_ssh_and_slurmrestd_on_random_loopback_ports(
        tmp_path: Path) -> None:
    services = compose_project(DAS3, "t", "img", tmp_path)["services"]
    published = {n: s["ports"] for n, s in services.items() if "ports" in s}
    assert published == {f"{s.name}-ctl": ["127.0.0.1::22", "127.0.0.1::6820"]
                         for s in DAS3.sites}


def test_controllers_publish_ssh_on_the_ports_chosen_at_bring_up(tmp_path: Path) -> None:
    ports = dict(zip((s.name for s in DAS3.sites), range(40001, 40006), strict=True))
    services = compose_project(DAS3, "t", "img", tmp_path, ports)["services"]
    published = {n: s["ports"] for n, s in services.items() if "ports" in s}
    assert published == {f"{s.name}-ctl": [f"127.0.0.1:{ports[s.name]}:22", "127.0.0.1::6820"]
                         for s in DAS3.sites}


def test_free_ports_are_distinct_and_can_be_bound() -> None:
    ports = free_ports(5)
    assert len(set(ports)) == 5 and all(1024 < p < 65536 for p in ports)
    held = []
    try:
        for port in ports:  # each one free right now: a listener can take it
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            held.append(sock)
            sock.bind(("127.0.0.1", port))
    finally:
        for sock in held:
            sock.close()


def test_start_order_accounting_then_compute_then_controller(tmp_path: Path) -> None:
    services = compose_project(SMALL, "t", "img", tmp_path)["services"]
    assert "depends_on" not in services["slurmdbd"]
    assert services["vu-c0"]["depends_on"] == {"slurmdbd": {"condition": "service_healthy"}}
    assert services["vu-ctl"]["depends_on"] == {
        "slurmdbd": {"condition": "service_healthy"},
        "vu-c0": {"condition": "service_started"}, "vu-c1": {"condition": "service_started"}}


def test_compute_containers_run_their_nodes_and_answer_to_their_names(tmp_path: Path) -> None:
    services = compose_project(SMALL, "t", "img", tmp_path)["services"]
    assert services["uva-c1"]["command"] == ["compute", "uva", "uva-n003", "uva-n004"]
    assert services["uva-c1"]["networks"]["default"]["aliases"] == ["uva-n003", "uva-n004"]
    assert services["uva-ctl"]["command"] == ["controller", "uva"]
    assert services["slurmdbd"]["command"] == ["accounting"]


def test_das3_has_16_containers_and_272_nodes(tmp_path: Path) -> None:
    services = compose_project(DAS3, "t", "img", tmp_path)["services"]
    assert len(services) == 1 + 5 * 3
    nodes = [n for s in services.values() if s["command"][0] == "compute"
             for n in s["command"][2:]]
    assert len(nodes) == len(set(nodes)) == 272


def test_document_is_json(tmp_path: Path) -> None:
    doc = compose_project(SMALL, "t", "img", tmp_path)
    assert json.loads(json.dumps(doc)) == doc
    assert doc["version"] == "2.4"


@pytest.mark.parametrize("name", ["", "Upper", "-x", "a b", "x" * 32, "a.b"])
def test_bad_testbed_names(name: str) -> None:
    with pytest.raises(InputError, match="bad testbed name"):
        check_name(name)


def test_project_name() -> None:
    assert project_name("ci-1") == "malleable-ci-1"


def test_each_site_shares_one_home_volume_between_its_containers(tmp_path: Path) -> None:
    doc = compose_project(SMALL, "t", "img", tmp_path)
    assert doc["volumes"] == {"vu-home": {}, "uva-home": {}}
    services = doc["services"]
    for site in SMALL.sites:
        for host in (site.controller, *site.compute_hosts()):
            assert homes(services[host]) == [f"{site.name}-home"]
    assert homes(services["slurmdbd"]) == []


def homes(service: dict[str, Any]) -> list[str]:
    """The volumes mounted on ``/home`` (each without Docker's copy of the image's /home)."""
    mounts = [v for v in service["volumes"] if isinstance(v, dict) and v["target"] == "/home"]
    assert all(m["type"] == "volume" and m["volume"] == {"nocopy": True} for m in mounts)
    assert not any(isinstance(v, str) and v.endswith(":/home") for v in service["volumes"])
    return [m["source"] for m in mounts]
