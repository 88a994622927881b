"""The Testbed API against a fake docker CLI that answers with recorded output."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from malleable.errors import ExternalError, InputError
from malleable.testbed import bringup
from malleable.testbed.docker import Docker, Result
from malleable.testbed.runtime import Testbed, list_testbeds
from malleable.testbed.state import Record, write_record
from malleable.testbed.topology import SMALL, Site, Topology

DATA = Path(__file__).resolve().parents[1] / "data" / "testbed"
# The recorded containers are vu-ctl, vu-c1 and slurmdbd of a small testbed named "proto".
TOPO = Topology("small", (Site("vu", 4),))


class FakeDocker(Docker):
    """Answers docker ps/inspect/exec/compose like a running testbed; records every call."""

    def __init__(self, inspect: list[dict[str, Any]]) -> None:
        super().__init__()
        self.inspect = inspect
        self.calls: list[tuple[str, ...]] = []
        self.squeue = [json.dumps({"jobs": [{"job_id": 12, "job_state": "RUNNING"}]}),
                       json.dumps({"jobs": []})]

    def run(self, argv: Sequence[str], *, timeout: float, check: bool = True,
            input_text: str | None = None) -> Result:
        args = tuple(argv)
        self.calls.append(args)
        out = ""
        if args[1:2] == ("ps",):
            out = "\n".join(str(d["Id"])[:12] for d in self.inspect)
        elif args[1:2] == ("inspect",):
            out = json.dumps(self.inspect)
        elif args[1:2] == ("exec",):
            out = self._exec(args[args.index("--workdir") + 3:])
        return Result(args, 0, out, "")

    def _exec(self, cmd: tuple[str, ...]) -> str:
        if cmd == ("sinfo", "--version"):
            return "slurm 24.11.5\n"
        if cmd == ("sinfo", "--json"):
            return json.dumps({"nodes": [{"name": f"vu-n00{i}", "state": "idle"}
                                         for i in range(1, 5)]})
        if cmd[0] == "sinfo":  # plain sinfo: the diagnostics, for a human
            return "".join(f"vu-n00{i} idle\n" for i in range(1, 5))
        if cmd[0] == "squeue":
            return self.squeue.pop(0) if len(self.squeue) > 1 else self.squeue[0]
        return ""


def _testbed(tmp_path: Path, record: bool = True) -> tuple[Testbed, FakeDocker]:
    docker = FakeDocker(json.loads((DATA / "inspect.json").read_text()))
    tb = Testbed("proto", root=tmp_path, docker=docker)
    if record:
        write_record(tb.state, Record("proto", tb.project, TOPO, "img"))
    return tb, docker


def test_constructor_does_no_io(tmp_path: Path) -> None:
    docker = FakeDocker([])
    Testbed("x", root=tmp_path, docker=docker)
    assert docker.calls == [] and not (tmp_path / "x").exists()


def test_containers_are_found_by_project_label(tmp_path: Path) -> None:
    tb, docker = _testbed(tmp_path)
    assert {c.hostname for c in tb.containers()} == {"vu-ctl", "vu-c1", "slurmdbd"}
    assert "label=com.docker.compose.project=malleable-proto" in docker.calls[0]


@pytest.mark.parametrize(("target", "host"), [("vu", "vu-ctl"), ("vu-c1", "vu-c1"),
                                              ("vu-n004", "vu-c1"), ("slurmdbd", "slurmdbd")])
def test_exec_targets(tmp_path: Path, target: str, host: str) -> None:
    tb, _ = _testbed(tmp_path)
    assert tb.container(target).hostname == host


def test_unknown_target_lists_the_valid_ones(tmp_path: Path) -> None:
    tb, _ = _testbed(tmp_path)
    with pytest.raises(InputError, match="try one of: slurmdbd, vu, vu-c1, vu-ctl"):
        tb.container("delft")


def test_exec_argv_runs_as_the_user_in_its_home(tmp_path: Path) -> None:
    tb, _ = _testbed(tmp_path)
    argv = tb.exec_argv("vu", ["sbatch", "--wrap", "hostname"], user="malleable")
    assert argv[:6] == ["docker", "exec", "--user", "malleable", "--workdir", "/home/malleable"]
    assert argv[-3:] == ["sbatch", "--wrap", "hostname"]
    assert tb.exec_argv("vu", ["id"])[3:6] == ["root", "--workdir", "/"]
    with pytest.raises(InputError, match="no command"):
        tb.exec_argv("vu", [])


def test_exec_into_a_stopped_container_fails(tmp_path: Path) -> None:
    tb, docker = _testbed(tmp_path)
    docker.inspect[0]["State"] = {"Status": "exited", "Running": False}
    with pytest.raises(ExternalError, match="vu-ctl is exited"):
        tb.exec("vu", ["sinfo"])


def test_endpoints_and_config(tmp_path: Path) -> None:
    tb, _ = _testbed(tmp_path)
    ep = tb.endpoints()["vu"]
    assert (ep.host, ep.port, ep.address, ep.user) == ("127.0.0.1", 32770, "172.19.0.7",
                                                       "malleable")
    assert ep.key == str(tmp_path / "proto" / "secrets" / "id_ed25519")
    assert ep.compute == ("vu-c0", "vu-c1")
    assert 'port = 32770' in tb.config_toml()


def test_config_fails_when_a_controller_is_missing(tmp_path: Path) -> None:
    tb, _ = _testbed(tmp_path, record=False)
    write_record(tb.state, Record("proto", tb.project, SMALL, "img"))
    with pytest.raises(ExternalError, match=r"site\(s\) uva of testbed 'proto' are not running"):
        tb.config_toml()


def test_status(tmp_path: Path) -> None:
    tb, _ = _testbed(tmp_path)
    status = tb.status()
    vu = status.sites["vu"]
    assert vu.idle == 4 and vu.jobs == 1 and vu.endpoint is not None
    assert status.up is False  # vu-c0 of the topology is missing from the recorded containers
    assert status.to_json()["sites"]["vu"]["node_states"] == {"idle": 4}
    assert status.to_json()["sites"]["vu"]["slurm_version"] == "24.11.5"


def test_the_record_keeps_the_slurm_version(tmp_path: Path) -> None:
    tb, _ = _testbed(tmp_path, record=False)
    write_record(tb.state, Record("proto", tb.project, TOPO, "img", "26.05"))
    assert tb.record().slurm == "26.05"
    doc = json.loads(tb.state.record_file.read_text())
    del doc["slurm"]  # a record written before versions existed
    tb.state.record_file.write_text(json.dumps(doc))
    assert tb.record().slurm == "22.05"


def test_up_refuses_another_version_of_a_running_testbed(tmp_path: Path) -> None:
    tb, docker = _testbed(tmp_path)
    docker.available = lambda: True  # type: ignore[method-assign]
    with pytest.raises(InputError, match=r"already up with Slurm 22\.05"):
        tb.up(TOPO, slurm="24.11")


def test_status_of_a_testbed_that_is_not_up(tmp_path: Path) -> None:
    tb, _ = _testbed(tmp_path, record=False)
    with pytest.raises(InputError, match="no testbed named 'proto' is up"):
        tb.status()


def test_damaged_record(tmp_path: Path) -> None:
    tb, _ = _testbed(tmp_path, record=False)
    tb.state.path.mkdir(parents=True)
    tb.state.record_file.write_text("{}")
    with pytest.raises(InputError, match="damaged testbed record"):
        tb.record()


def test_down_cancels_jobs_before_removing_everything(tmp_path: Path) -> None:
    tb, docker = _testbed(tmp_path)
    tb.state.compose_file.write_text("{}")
    tb.down(timeout=10)
    cmds = [c for c in docker.calls if c[1] != "inspect"]
    scancel = next(i for i, c in enumerate(cmds) if "scancel" in c)
    compose_down = next(i for i, c in enumerate(cmds) if "down" in c)
    rm = next(i for i, c in enumerate(cmds) if c[1] == "rm")
    assert scancel < compose_down < rm
    assert cmds[scancel][-3:] == ("scancel", "--partition", "batch")
    assert sum(1 for c in cmds if "squeue" in c) == 2  # polled until the queue was empty
    assert not tb.state.path.exists()


def test_failed_bring_up_dumps_diagnostics(tmp_path: Path) -> None:
    tb, docker = _testbed(tmp_path)
    docker.inspect[1]["State"] = {"Status": "exited", "Running": False}
    with pytest.raises(ExternalError, match=r"vu-c1 stopped; diagnostics in (\S+);") as info:
        bringup.wait_ready(tb, TOPO, 0.0, lambda *a: None)
    path = Path(re.search(r"diagnostics in (\S+);", str(info.value)).group(1))  # type: ignore
    text = path.read_text()
    assert "== containers" in text and "vu-c1" in text and "exited" in text
    assert "== vu-ctl: sinfo" in text and "vu-n001 idle" in text
    assert "== vu-c1: docker logs" in text and "== slurmdbd: slurmdbd.log" in text


def test_wait_times_out_with_what_was_missing(tmp_path: Path) -> None:
    tb, docker = _testbed(tmp_path)
    docker.inspect[1]["State"]["Health"] = {"Status": "starting"}
    with pytest.raises(ExternalError, match="not ready before the deadline: 2 of 4 containers"):
        bringup.wait_ready(tb, TOPO, 0.0, lambda *a: None)


def test_list_testbeds_groups_containers_by_label() -> None:
    class Ps(Docker):
        def run(self, argv: Sequence[str], *, timeout: float, check: bool = True,
                input_text: str | None = None) -> Result:
            assert "label=org.malleable.testbed" in argv
            return Result(tuple(argv), 0, "b running\na running\na exited\na running\n", "")

    assert list_testbeds(Ps()) == {"a": {"running": 2, "containers": 3},
                                   "b": {"running": 1, "containers": 1}}
