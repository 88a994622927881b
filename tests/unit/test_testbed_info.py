"""Parsers of docker inspect, sinfo and squeue output (recorded from a small testbed; the
Slurm JSON of each version from tests/data/slurm/V/)."""

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
SLURM = DATA.parent / "slurm"


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


@pytest.mark.parametrize("version", ["22.05", "24.11", "26.05"])
def test_parse_sinfo_json_of_each_version_and_count(version: str) -> None:
    """The testbed reads nodes as the adapter does (``sinfo --json``, both layouts)."""
    idle = parse_sinfo((SLURM / version / "sinfo_idle.json").read_text())
    assert idle == {f"uva-n00{i}": "idle" for i in range(1, 5)}
    busy = parse_sinfo((SLURM / version / "sinfo_busy.json").read_text())
    assert count_states(busy) == {"allocated": 3, "idle": 1}
    assert parse_sinfo("not json") == {}


def test_node_words_are_sinfo_format_t_words() -> None:
    """Checked against ``sinfo --format='%N %T'`` on a 22.05 testbed (a drained idle node:
    drained)."""
    doc = {"nodes": [{"name": "a-n1", "state": "allocated"},
                     {"name": "a-n2", "state": "down", "state_flags": ["NOT_RESPONDING"]},
                     {"name": "a-n3", "state": "idle", "state_flags": ["DRAIN"]},
                     {"name": "a-n4", "state": "mixed", "state_flags": ["DRAIN"]},
                     {"name": "a-n5", "state": ["IDLE", "COMPLETING"]},
                     {"name": "a-n1", "state": "idle"}]}
    states = parse_sinfo(json.dumps(doc))
    assert states == {"a-n1": "allocated", "a-n2": "down*", "a-n3": "drained",
                      "a-n4": "draining", "a-n5": "completing"}
    assert count_states(states)["allocated"] == 1


@pytest.mark.parametrize("version", ["22.05", "24.11", "26.05"])
def test_parse_squeue_json_lists_the_jobs_not_ended(version: str) -> None:
    """22.05's JSON also lists the helper that has just ended; plain squeue does not, nor
    does the testbed's count."""
    jobs = parse_squeue((SLURM / version / "squeue.json").read_text())
    assert jobs == {"1": "RUNNING", "3": "RUNNING", "4": "PENDING"}
    assert parse_squeue('{"jobs": []}') == {} and parse_squeue("") == {}
    completing = {"jobs": [{"job_id": 5, "job_state": ["COMPLETED", "COMPLETING"]}]}
    assert parse_squeue(json.dumps(completing)) == {"5": "COMPLETING"}


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
