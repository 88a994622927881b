"""The agent's OAR requests on the fake OAR site: ``extend`` submits one-node extension jobs
of its own base job as its user; ``release`` deletes only those, and refuses the whole
request when any id is not one of them (the base job, another job of the user, another
user's job named like an extension, an unknown id)."""

from __future__ import annotations

from pathlib import Path

import pytest

from malleable.adapters.oar.ctl import OarCtl
from malleable.adapters.shell import CommandTimeout
from malleable.site.agent import Agent, build, parser_of
from malleable.site.oaragent import OarOps, extension_name, start_files
from tests.fakes.oar import FakeOar, FakeOarJob


def _as(fake: FakeOar, user: str, nodes: int, name: str, walltime: str = "1:30:00"
        ) -> FakeOarJob:
    fake.user = user
    (job_id,) = OarCtl(fake).submit(["-n", name, "-l", f"nodes={nodes},walltime={walltime}"],
                                    "sleep 600")
    return fake.jobs[job_id]


def _alice(nodes: int = 5) -> tuple[FakeOar, FakeOarJob, OarOps]:
    fake = FakeOar([f"n{i}" for i in range(1, nodes + 1)])
    base = _as(fake, "alice", 1, "m1;min=1;max=4")
    assert base.state == "Running"
    return fake, base, OarOps(base.job_id, OarCtl(fake), user="alice")


def test_extend_submits_extensions_of_its_own_job_as_its_user() -> None:
    fake, base, ops = _alice()
    ids = ops.extend(2)
    assert len(ids) == 2
    for job_id in ids:
        job = fake.jobs[job_id]
        assert (job.name, job.owner, job.want, job.state) == (
            extension_name(base.job_id), "alice", 1, "Running")
        assert job.walltime == base.walltime == 5400
        assert f"oarstat -s -j {base.job_id}" in job.command  # holds its node while base lives
    assert fake.calls[-1][:4] == ["oarsub", "-J", "--array", "2"]


@pytest.mark.parametrize("count", [0, -1, 1001, "2", True, None, 1.5])
def test_extend_refuses_a_bad_count(count: object) -> None:
    fake, _, ops = _alice()
    before = len(fake.jobs)
    with pytest.raises(ValueError, match="count must be an integer"):
        ops.extend(count)
    assert len(fake.jobs) == before


def test_extend_refuses_once_the_base_job_ended() -> None:
    fake, base, ops = _alice()
    fake.finish(base.job_id)
    with pytest.raises(ValueError, match="is not running"):
        ops.extend(1)
    assert len(fake.jobs) == 1


def test_release_deletes_its_own_extensions() -> None:
    fake, base, ops = _alice()
    ids = ops.extend(3)
    assert ops.release(ids[1:]) == ids[1:]
    assert [fake.jobs[i].state for i in ids] == ["Running", "Error", "Error"]
    assert base.state == "Running"


def test_release_refuses_anything_but_its_own_extensions() -> None:
    fake, base, ops = _alice(nodes=8)
    (ext,) = ops.extend(1)
    other = _as(fake, "alice", 1, "another")                           # hers, not an extension
    sibling = _as(fake, "alice", 1, extension_name(base.job_id + 100))  # another job's
    forged = _as(fake, "bob", 1, extension_name(base.job_id))          # bob's, named as hers
    fake.user = "alice"
    for ids in ([base.job_id], [other.job_id], [sibling.job_id], [forged.job_id], [9999],
                [ext, base.job_id]):
        with pytest.raises(ValueError, match="not extension jobs of job"):
            ops.release(ids)
    for job in (base, other, sibling, forged, fake.jobs[ext]):
        assert job.state == "Running" and "FRAG_JOB_REQUEST" not in job.events
    for bad in ([], "3", [True], [0], None):
        with pytest.raises(ValueError, match="ids must be a list"):
            ops.release(bad)
    assert not any(c[0] == "oardel" for c in fake.calls)


def test_the_agent_serves_the_oar_requests_only_with_oar(tmp_path: Path) -> None:
    _, base, ops = _alice()
    agent = Agent(str(tmp_path), "", "n1", oar=ops)
    reply = agent.handle({"op": "extend", "count": 2})
    assert len(reply["ids"]) == 2
    assert agent.handle({"op": "release", "ids": reply["ids"][:1]}) == {"ids": reply["ids"][:1]}
    refused = agent.handle({"op": "release", "ids": [base.job_id]})
    assert "refused" in refused["error"] and base.state == "Running"
    assert "count must be" in agent.handle({"op": "extend", "count": 0})["error"]
    plain = Agent(str(tmp_path), "", "n1")
    assert plain.handle({"op": "extend", "count": 1}) == {"error": "unknown op 'extend'"}


def test_start_files_tell_the_command_its_nodes(tmp_path: Path) -> None:
    nodefile = tmp_path / "nodefile"
    nodefile.write_text("n2\nn2\nn3\nn3\n")
    run = tmp_path / "run" / "7"
    assert start_files(str(run), str(nodefile)) == ["n2", "n3"]
    assert (run / "nodes").read_text() == "n2\nn3\n"
    assert (run / "size").read_text() == "2\n"
    assert sorted(p.name for p in run.iterdir()) == ["nodes", "size"]


def test_an_oar_command_that_overruns_is_an_error_reply_not_the_agent_s_end(
        tmp_path: Path) -> None:
    fake, base, _ = _alice()

    class Slow:
        def run(self, argv: list[str], timeout: float, **kw: object) -> object:
            if argv[0] == "oarsub":
                raise CommandTimeout(argv, timeout)
            return fake.run(argv, timeout, **kw)  # type: ignore[arg-type]

    fake.user = "alice"
    agent = Agent(str(tmp_path), "", "n1", oar=OarOps(base.job_id, OarCtl(Slow()), "alice"))
    reply = agent.handle({"op": "extend", "count": 1})
    assert reply["error"].startswith("CommandTimeout: ") and len(fake.jobs) == 1
    assert agent.handle({"op": "release", "ids": [base.job_id]})["error"].startswith(
        "ValueError: release: ")


#: An ``ssh NODE COMMAND`` that runs COMMAND here and records the node it was sent to.
def _fake_ssh(log: Path) -> tuple[str, ...]:
    return ("sh", "-c", f'echo "$1" >> {log}; exec sh -c "$2"', "ssh")


def test_a_shared_run_directory_is_read_and_written_where_the_agent_runs(
        tmp_path: Path) -> None:
    """On OAR (``--oar``) the run directory is in the shared home: whatever node the
    service names, the agent reads and writes it itself, with no hop to the node; only the
    node's host name (``stage``) and its processes (``ps``) need the node."""
    run, log = tmp_path / "run" / "7", tmp_path / "ssh.log"
    (run / "ch").mkdir(parents=True)
    agent = Agent(str(run), "jacobi.py", "grid-c0", python_ssh=_fake_ssh(log), shared=True)
    assert agent.handle({"op": "write", "node": "grid-n003", "path": f"{run}/ch/offer.json",
                         "text": "{}"}) == {}
    assert (run / "ch" / "offer.json").read_text() == "{}"
    assert agent.handle({"op": "read", "node": "grid-n003",
                         "path": f"{run}/ch/offer.json"}) == {"text": "{}"}
    assert not log.exists()  # no ssh for the files
    reply = agent.handle({"op": "stage", "node": "grid-n003"})
    assert reply["text"]  # the host name the node answered
    assert log.read_text().split() == ["grid-n003"]
    assert "error" in agent.handle({"op": "read", "node": "grid-n003", "path": "/etc/passwd"})


def test_an_unshared_run_directory_goes_to_the_node(tmp_path: Path) -> None:
    run, log = tmp_path / "run", tmp_path / "ssh.log"
    run.mkdir()
    agent = Agent(str(run), "p.py", "here", python_ssh=_fake_ssh(log))
    agent.handle({"op": "write", "node": "n2", "path": f"{run}/x", "text": "1"})
    assert log.read_text().split() == ["n2"] and (run / "x").read_text() == "1"


def test_an_oar_mpi_agent_leaves_the_nodes_file_to_the_runner(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    nodefile = tmp_path / "nodefile"
    nodefile.write_text("n1\nn1\nn2\n")
    monkeypatch.setenv("OAR_NODEFILE", str(nodefile))
    base = ["--oar", "--service", "h:1", "--site", "grid", "--job", "7", "--run-dir"]
    plain = build(parser_of().parse_args([*base, str(tmp_path / "a")]))
    assert plain.shared and plain.oar is not None and plain.oar.base == 7
    assert (tmp_path / "a" / "size").read_text() == "2\n"
    mpi = build(parser_of().parse_args([*base, str(tmp_path / "b"), "--program", "j.py"]))
    assert mpi.shared and mpi.program == "j.py" and not (tmp_path / "b").exists()
    slurm = build(parser_of().parse_args([*base[1:], str(tmp_path / "c")]))
    assert not slurm.shared and slurm.oar is None
