"""``manager serve`` grows and shrinks a user's ``--mpi`` job on an OAR site through its
agent, on the fake OAR site: the OAR runner's logic (extension jobs, then the offer through
the file channel, the program's answer read back, declined nodes released; a shrink offered
first and released after), every extension job submitted and deleted by the agent as the
job's user, the run directory read and written by the agent, the job's ``nodes`` file kept in
the runner's format."""

from __future__ import annotations

import json
import logging
import re
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from malleable.adapters.oar.ctl import OarCtl
from malleable.config import SiteConfig
from malleable.realtime import Outcome
from malleable.site import tag as tags
from malleable.site.agent import Agent
from malleable.site.assembly import open_service
from malleable.site.channel import ChannelError, ChannelServer, Session
from malleable.site.daemon import SiteService
from malleable.site.driver import ServiceDriver, driver_for
from malleable.site.oaragent import OarOps, extension_name
from malleable.site.oarsite import MPI_GROW_WAIT, SiteOar
from tests.fakes.oar import FakeOar, FakeOarJob
from tests.fakes.service_config import ACCOUNT, service_config
from tests.fakes.slurm import settle

#: ``ssh NODE hostname`` as the fake's nodes answer: the node's MPI host name.
SSH = ("sh", "-c", 'echo "host-$1"', "ssh")


class Program(Session):
    """The job's agent, in process (its OAR requests as ``user`` on the fake), and behind it
    the MPI program: it answers each offer at once, taking at most ``limit`` processes."""

    def __init__(self, fake: FakeOar, job: FakeOarJob, user: str, run_dir: Path,
                 fresh: bool = True) -> None:
        seq = 0 if fresh else json.loads((run_dir / "ch" / "offer.json").read_text())["seq"]
        super().__init__("grid", job.job_id, user, "jacobi.py", str(run_dir), "grid-n1", seq,
                         None, None)  # type: ignore[arg-type]
        self.fake = fake
        self.agent = Agent(str(run_dir), "jacobi.py", "grid-c0", python_ssh=SSH,
                           oar=OarOps(job.job_id, OarCtl(fake), user), shared=True)
        self.requests: list[dict[str, Any]] = []
        self.size = len(job.nodes)
        self.limit = 1000
        if fresh:
            (run_dir / "ch").mkdir(parents=True)
            (run_dir / "nodes").write_text("".join(f"{n} host-{n}\n" for n in job.nodes))

    def call(self, op: str, **args: Any) -> dict[str, Any]:
        if self.closed:
            raise ChannelError(f"the channel of job {self.job} is closed")
        self.requests.append({"op": op, **args})
        saved, self.fake.user = self.fake.user, self.user
        try:
            reply = self.agent.handle({"op": op, **args})
        finally:
            self.fake.user = saved
        if "error" in reply:
            raise ChannelError(reply["error"])
        if op == "write" and str(args["path"]).endswith("/ch/offer.json"):
            self.answer(json.loads(args["text"]))
        return reply

    def answer(self, offer: dict[str, Any]) -> None:
        seq, accepted = offer["seq"], min(offer["target"], self.limit)
        ch = Path(self.run_dir, "ch")
        (ch / f"answer-{seq}.json").write_text(json.dumps({"seq": seq, "accepted": accepted}))
        (ch / f"done-{seq}.json").write_text(json.dumps({"seq": seq, "size": accepted,
                                                         "error": ""}))
        self.size = accepted

    def ops(self) -> list[str]:
        return [str(r["op"]) + (":" + str(r["path"]).rsplit("/", 1)[-1] if "path" in r else "")
                for r in self.requests]

    def close(self) -> None:
        self.closed = True




class World:
    def __init__(self, tmp_path: Path, nodes: int = 4) -> None:
        self.fake = FakeOar([f"grid-n{i}" for i in range(1, nodes + 1)])
        self.tmp = tmp_path
        self.service: SiteService = open_service(
            service_config(tmp_path, approach="pwa"), self._ctl)
        self.driver: ServiceDriver = driver_for(self.service)
        self.channel = ChannelServer("127.0.0.1", 0)
        adapter = self.service.adapters["grid"]
        assert isinstance(adapter, SiteOar)
        self.adapter = adapter
        adapter.channel = self.channel
        adapter.cluster.sleep = lambda s: None

    def _ctl(self, site: SiteConfig) -> OarCtl:
        return OarCtl(self.fake)

    def submit(self, user: str, low: int, high: int, nodes: int, sub: str,
               mpi: bool = True) -> FakeOarJob:
        self.fake.user = user
        try:
            name = tags.encode_oar(tags.UserTag(low, high, mpi=mpi, sub=sub))
            (job_id,) = OarCtl(self.fake).submit(["--hold", "-n", name, "-l",
                                                  f"nodes={nodes},walltime=1:00:00"], "app")
        finally:
            self.fake.user = ACCOUNT
        return self.fake.jobs[job_id]

    def connect(self, job: FakeOarJob, user: str) -> Program:
        program = Program(self.fake, job, user, self.tmp / "run" / str(job.job_id))
        self.channel.sessions[("grid", job.job_id)] = program
        return program

    def cycle(self, cycles: int = 1) -> None:
        with ThreadPoolExecutor(max_workers=2) as pool:
            for _ in range(cycles):
                self.driver._cycle(pool, Outcome(0, "", 0))
                assert settle(self.driver.manager.clusters.values()) == []

    def extensions(self, base: FakeOarJob, state: str = "Running") -> list[FakeOarJob]:
        return [j for j in self.fake.jobs.values()
                if j.name == extension_name(base.job_id) and j.state == state]


def _offers(program: Program) -> list[dict[str, Any]]:
    return [json.loads(r["text"]) for r in program.requests
            if r["op"] == "write" and str(r["path"]).endswith("/ch/offer.json")]


def test_an_mpi_job_grows_by_its_users_extensions_offered_to_the_program(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="malleable.site.oarsite")
    world = World(tmp_path)
    alice = world.submit("alice", 2, 4, 2, sub="a1")
    world.cycle(2)
    assert alice.state == "Running" and len(alice.nodes) == 2
    program = world.connect(alice, "alice")
    world.cycle(3)
    grown = world.extensions(alice)
    assert len(grown) == 2 and {j.owner for j in grown} == {"alice"}
    assert program.ops()[:5] == ["read:nodes", "extend", "stage", "stage", "write:offer.json"]
    assert program.requests[1] == {"op": "extend", "count": 2}
    [offer] = _offers(program)
    assert offer["target"] == 4 and offer["hosts"] == [
        f"host-{n}" for n in [*alice.nodes, *(j.nodes[0] for j in grown)]]
    assert program.size == 4
    run = tmp_path / "run" / str(alice.job_id)
    assert [line.split() for line in (run / "nodes").read_text().splitlines()] == [
        [n, f"host-{n}"] for n in [*alice.nodes, *(j.nodes[0] for j in grown)]]
    assert not (run / "size").exists()  # the runner's files, not the plain job's
    record = world.service.manager.records["alice:a1"]
    assert [s for _, s in record.sizes] == [2, 4]
    assert world.adapter.observe().running["alice:a1"].size == 4
    submitted = [c for c in world.fake.calls if c[0] in ("oarsub", "oardel")]
    assert all(world.fake.jobs[j].owner == "alice" for j in world.adapter.mpi_jobs[
        "alice:a1"].submitted) and submitted  # every extension the agent's, as alice
    assert world.adapter.mpi_jobs["alice:a1"].grow_wait == MPI_GROW_WAIT  # > 15 + 4 * 0.5
    ids = ",".join(str(j.job_id) for j in sorted(grown, key=lambda j: j.job_id))
    assert re.search(rf"event=mpi_resized site=grid job=alice:a1 processes=2->4 size=2->4 "
                     rf"oar_ids={ids} decided=\d+\.\d+ seconds=", caplog.text)
    world.service.close()


def test_nodes_the_program_declines_are_released_through_the_agent(tmp_path: Path) -> None:
    world = World(tmp_path)
    alice = world.submit("alice", 2, 4, 2, sub="a1")
    world.cycle(2)
    program = world.connect(alice, "alice")
    program.limit = 3
    world.cycle(1)
    assert program.ops()[:4] == ["read:nodes", "extend", "stage", "stage"]
    release = next(r for r in program.requests if r["op"] == "release")
    assert program.ops().index("release") > program.ops().index("write:offer.json")
    (declined,) = release["ids"]
    assert world.fake.jobs[declined].state in ("Error", "Finishing")
    assert len(world.extensions(alice)) == 1 and program.size == 3
    world.cycle(2)
    record = world.service.manager.records["alice:a1"]
    assert record.sizes[-1][1] == 3
    collection = world.adapter.cluster.collection("alice:a1")
    assert collection is not None and declined in collection.released
    world.service.close()


def test_a_shrink_is_offered_first_and_released_after_the_program_took_it(
        tmp_path: Path) -> None:
    world = World(tmp_path)
    alice = world.submit("alice", 2, 4, 2, sub="a1")
    world.cycle(2)
    program = world.connect(alice, "alice")
    world.cycle(2)
    assert program.size == 4
    newest = sorted(j.job_id for j in world.extensions(alice))
    del program.requests[:]
    bob = world.submit("bob", 2, 2, 2, sub="b1", mpi=False)  # PWA makes room for him
    world.cycle(3)
    assert program.ops()[0] == "write:offer.json" and _offers(program)[0]["target"] == 2
    release = next(r for r in program.requests if r["op"] == "release")
    assert sorted(release["ids"]) == newest and program.size == 2
    assert world.extensions(alice) == []
    assert alice.state == "Running" and bob.state == "Running"
    assert [s for _, s in world.service.manager.records["alice:a1"].sizes] == [2, 4, 2]
    world.service.close()


def test_an_mpi_job_whose_program_has_not_started_is_not_resized(tmp_path: Path) -> None:
    world = World(tmp_path)
    alice = world.submit("alice", 2, 4, 2, sub="a1")
    world.cycle(2)
    program = world.connect(alice, "alice")
    (Path(program.run_dir) / "nodes").unlink()  # the script has not listed its nodes yet
    world.cycle(2)
    assert world.extensions(alice) == [] and program.ops() == ["read:nodes", "read:nodes"]
    assert world.service.manager.records["alice:a1"].sizes[-1][1] == 2
    world.service.close()


def test_an_extension_the_agent_cannot_release_is_deleted_as_oar(tmp_path: Path) -> None:
    world = World(tmp_path)
    alice = world.submit("alice", 2, 4, 2, sub="a1")
    world.cycle(2)
    program = world.connect(alice, "alice")
    world.cycle(2)
    job = world.adapter.mpi_jobs["alice:a1"]
    program.close()
    (ext, *_) = job.extensions.values()
    job._delete_extensions([ext])
    assert ["sudo", "-n", "-u", "oar", "oardel", str(ext)] in world.fake.calls
    assert job.deleted == [ext]
    world.service.close()


def test_a_fixed_size_mpi_job_has_an_agent_too(tmp_path: Path) -> None:
    """Its script starts the agent beside mpirun, as on Slurm: the channel admits it (it is
    never resized: its range is one size)."""
    world = World(tmp_path, nodes=6)
    fixed = world.submit("alice", 2, 2, 2, sub="f1")
    plain = world.submit("bob", 2, 2, 2, sub="b1", mpi=False)
    world.cycle(2)
    assert world.adapter.owner(fixed.job_id) == ("alice", True)
    assert world.adapter.owner(plain.job_id) == ("bob", False)
    world.service.close()


def test_a_reconnected_agent_s_job_knows_its_extensions_by_node(tmp_path: Path) -> None:
    """A new session (the agent reconnected, e.g. after a service restart): the process set
    comes back from the run directory's nodes file, and each extension from the service's
    record of the job, matched to its node by oarstat, so a shrink releases the right ones."""
    world = World(tmp_path)
    alice = world.submit("alice", 2, 4, 2, sub="a1")
    world.cycle(2)
    first = world.connect(alice, "alice")
    world.cycle(2)
    assert first.size == 4
    grown = {j.nodes[0]: j.job_id for j in world.extensions(alice)}
    first.close()
    again = Program(world.fake, alice, "alice", Path(first.run_dir), fresh=False)
    again.size = 4
    world.channel.sessions[("grid", alice.job_id)] = again
    assert world.adapter.request_shrink("alice:a1", 1, False) == 1
    job = world.adapter.mpi_jobs["alice:a1"]
    assert job.session is again and job.deleted == [grown["grid-n4"]]
    assert job.extensions == {"grid-n3": grown["grid-n3"]}
    release = next(r for r in again.requests if r["op"] == "release")
    assert release["ids"] == [grown["grid-n4"]]  # the node the program left
    assert _offers(again)[0]["seq"] == 2  # after the first session's offer
    world.service.close()
