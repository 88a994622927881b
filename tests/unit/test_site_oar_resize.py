"""``manager serve`` grows and shrinks users' OAR jobs through their agents, on the fake OAR
site: extension jobs submitted and deleted by the agent as the job's user (never by the
service), a job resized only while its agent is connected, late extensions released and
not counted, never below the base job, the size from oarstat and told to the command
through the run directory's files, leftovers deleted at the base job's end, and another
user's job named like an extension never taken for one."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from malleable.adapters.oar.ctl import OarCtl
from malleable.config import SiteConfig
from malleable.model import JobState
from malleable.realtime import Outcome
from malleable.site import tag as tags
from malleable.site.agent import Agent
from malleable.site.assembly import open_service
from malleable.site.channel import ChannelError, ChannelServer, Session
from malleable.site.daemon import SiteService
from malleable.site.driver import ServiceDriver, driver_for
from malleable.site.oaragent import OarOps, extension_name
from malleable.site.oarsite import SiteOar
from tests.fakes.oar import FakeOar, FakeOarJob
from tests.fakes.service_config import ACCOUNT, service_config
from tests.fakes.slurm import settle

SUDO = ["sudo", "-n", "-u", "oar"]


class AgentSession(Session):
    """A connected agent, in process: its requests run as ``user`` on the fake site."""

    def __init__(self, fake: FakeOar, job: int, user: str, run_dir: Path) -> None:
        super().__init__("grid", job, user, "", str(run_dir), "grid-n1", 0, None, None)  # type: ignore[arg-type]
        self.fake = fake
        self.agent = Agent(str(run_dir), "", "grid-n1", oar=OarOps(job, OarCtl(fake), user))
        self.requests: list[dict[str, Any]] = []

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
        return reply

    def close(self) -> None:
        self.closed = True




class World:
    def __init__(self, tmp_path: Path, nodes: int = 4) -> None:
        self.fake = FakeOar([f"grid-n{i}" for i in range(1, nodes + 1)])
        self.tmp = tmp_path
        self.service: SiteService = open_service(service_config(tmp_path, approach="pra"),
                                                 lambda s: self._ctl(s))
        self.driver: ServiceDriver = driver_for(self.service)
        self.channel = ChannelServer("127.0.0.1", 0)
        adapter = self.service.adapters["grid"]
        assert isinstance(adapter, SiteOar)
        self.adapter = adapter
        adapter.channel = self.channel
        adapter.cluster.sleep = lambda s: None

    def _ctl(self, site: SiteConfig) -> OarCtl:
        return OarCtl(self.fake)

    def submit(self, user: str, low: int, high: int, nodes: int, sub: str) -> FakeOarJob:
        self.fake.user = user
        try:
            name = tags.encode_oar(tags.UserTag(low, high, sub=sub))
            (job_id,) = OarCtl(self.fake).submit(["--hold", "-n", name, "-l",
                                                  f"nodes={nodes},walltime=1:00:00"], "app")
        finally:
            self.fake.user = ACCOUNT
        return self.fake.jobs[job_id]

    def connect(self, job: FakeOarJob, user: str) -> AgentSession:
        session = AgentSession(self.fake, job.job_id, user, self.tmp / f"run{job.job_id}")
        self.channel.sessions[("grid", job.job_id)] = session
        return session

    def cycle(self, cycles: int = 1) -> None:
        with ThreadPoolExecutor(max_workers=2) as pool:
            for _ in range(cycles):
                self.driver._cycle(pool, Outcome(0, "", 0))
                assert settle(self.driver.manager.clusters.values()) == []

    def extensions(self, base: FakeOarJob, state: str = "Running") -> list[FakeOarJob]:
        return [j for j in self.fake.jobs.values()
                if j.name == extension_name(base.job_id) and j.state == state]


def test_the_policy_grows_a_job_through_its_agent_only_once_connected(tmp_path: Path) -> None:
    world = World(tmp_path)
    alice = world.submit("alice", 1, 3, 1, sub="a1")
    world.cycle(3)
    assert alice.state == "Running" and world.extensions(alice) == []
    record = world.service.manager.records["alice:a1"]
    assert record.sizes[-1][1] == 1  # no agent yet: rigid, not grown
    session = world.connect(alice, "alice")
    world.cycle(3)
    grown = world.extensions(alice)
    assert len(grown) == 2 and {j.owner for j in grown} == {"alice"}
    assert session.requests[0] == {"op": "extend", "count": 2}
    assert record.sizes[-1][1] == 3 and record.state is JobState.RUNNING
    assert {op.kind for op in world.service.manager.operations} == {"place", "grow"}
    run = tmp_path / f"run{alice.job_id}"
    assert (run / "size").read_text() == "3\n"
    assert sorted((run / "nodes").read_text().split()) == sorted(
        [*alice.nodes, *(n for j in grown for n in j.nodes)])
    view = world.adapter.observe()
    assert view.idle == 1 and view.running["alice:a1"].size == 3
    world.service.close()


def test_a_shrink_releases_extensions_through_the_agent_never_the_base_job(
        tmp_path: Path) -> None:
    world = World(tmp_path, nodes=5)
    alice = world.submit("alice", 1, 4, 1, sub="a1")
    world.cycle(2)
    session = world.connect(alice, "alice")
    world.cycle(3)
    assert len(world.extensions(alice)) == 3
    newest = sorted(j.job_id for j in world.extensions(alice))[-1]
    assert world.adapter.request_shrink("alice:a1", 1, False) == 1
    assert session.requests[-3] == {"op": "release", "ids": [newest]}
    assert world.fake.jobs[newest].state == "Error"
    assert (tmp_path / f"run{alice.job_id}" / "size").read_text() == "3\n"
    assert world.adapter.request_shrink("alice:a1", 10, True) == 2  # the base job stays
    assert world.adapter.request_shrink("alice:a1", 1, True) == 0
    assert alice.state == "Running" and world.extensions(alice) == []
    assert (tmp_path / f"run{alice.job_id}" / "size").read_text() == "1\n"
    world.cycle()
    assert world.service.manager.records["alice:a1"].sizes[-1][1] == 1
    assert not any(c[:4] == SUDO and c[4] == "oardel" for c in world.fake.calls)
    world.service.close()


def test_extensions_not_running_in_time_are_released_and_not_counted(tmp_path: Path) -> None:
    world = World(tmp_path)
    alice = world.submit("alice", 1, 3, 1, sub="a1")
    world.fake.add_job(2, name="busy")  # bob's work holds the rest
    world.cycle(2)
    session = world.connect(alice, "alice")
    world.adapter.cluster.grow_wait = world.adapter.cluster.grow_wait_per_node = 0.0
    assert world.adapter.offer_grow("alice:a1", 2) == 1  # one free node: one runs in time
    late = world.extensions(alice, "Error")
    assert len(late) == 1 and session.requests[1] == {"op": "release",
                                                     "ids": [late[0].job_id]}
    assert len(world.extensions(alice)) == 1
    world.cycle()
    assert world.service.manager.records["alice:a1"].sizes[-1][1] == 2
    world.service.close()


def test_a_closed_agent_stops_resizes_and_leftovers_go_with_the_base_job(
        tmp_path: Path) -> None:
    world = World(tmp_path)
    alice = world.submit("alice", 1, 3, 1, sub="a1")
    world.cycle(2)
    session = world.connect(alice, "alice")
    world.cycle(3)
    grown = world.extensions(alice)
    assert len(grown) == 2
    session.close()
    assert world.adapter.request_shrink("alice:a1", 1, False) == 0
    view = world.adapter.observe()
    assert not view.running["alice:a1"].can_shrink  # rigid again without its agent
    world.fake.finish(alice.job_id)
    world.cycle(2)
    assert world.service.manager.records["alice:a1"].state is JobState.COMPLETED
    ids = sorted(str(j.job_id) for j in grown)
    assert [*SUDO, "oardel", *ids] in world.fake.calls
    assert all(j.state == "Error" for j in grown)
    world.service.close()


def test_another_user_s_job_named_as_an_extension_is_never_taken_for_one(
        tmp_path: Path) -> None:
    world = World(tmp_path, nodes=6)
    alice = world.submit("alice", 1, 2, 1, sub="a1")
    world.cycle(2)
    world.fake.user = "bob"
    (forged,) = OarCtl(world.fake).submit(["-n", extension_name(alice.job_id), "-l",
                                           "nodes=1"], "sleep 600")
    world.fake.user = ACCOUNT
    world.connect(alice, "alice")
    world.cycle(3)
    record = world.service.manager.records["alice:a1"]
    assert record.sizes[-1][1] == 2  # her own extension only
    assert world.fake.jobs[forged].state == "Running"
    world.fake.finish(alice.job_id)
    world.cycle(2)
    assert world.fake.jobs[forged].state == "Running"
    assert not any(str(forged) in c for c in world.fake.calls if "oardel" in c)
    world.service.close()


def test_the_owner_says_which_jobs_have_an_agent(tmp_path: Path) -> None:
    world = World(tmp_path, nodes=6)
    alice = world.submit("alice", 1, 3, 1, sub="a1")
    bob = world.submit("bob", 2, 2, 2, sub="b1")
    world.cycle(2)
    assert world.adapter.owner(alice.job_id) == ("alice", True)
    assert world.adapter.owner(bob.job_id) == ("bob", False)
    assert world.adapter.owner(999) is None
    world.service.close()


def test_released_nodes_count_as_idle_while_oar_finishes_their_jobs(tmp_path: Path) -> None:
    """Else the policy, still seeing them busy, shrinks the job again for the same waiting
    job (seen on the testbed: 3 -> 2 -> 1 for a 2-node job on 4 nodes)."""
    world = World(tmp_path)
    world.fake.finishing = 5
    alice = world.submit("alice", 1, 3, 1, sub="a1")
    world.cycle(2)
    world.connect(alice, "alice")
    world.cycle(3)
    assert world.adapter.observe().idle == 1
    assert world.adapter.request_shrink("alice:a1", 1, False) == 1
    (finishing,) = world.extensions(alice, "Finishing")
    view = world.adapter.observe()
    assert view.idle == 2 and view.running["alice:a1"].size == 2
    assert finishing.state == "Finishing"  # OAR still holds its node
    world.service.close()


def test_after_a_restart_the_extensions_are_the_job_s_again(tmp_path: Path) -> None:
    """The journal (and the poll, by name and owner) gives the job its extensions back; its
    agent connects again and a shrink releases a live one."""
    world = World(tmp_path)
    alice = world.submit("alice", 1, 3, 1, sub="a1")
    world.cycle(2)
    world.connect(alice, "alice")
    world.cycle(3)
    grown = sorted(j.job_id for j in world.extensions(alice))
    assert len(grown) == 2
    world.service.store.close()  # as after SIGKILL
    again = World.__new__(World)
    again.fake, again.tmp = world.fake, tmp_path
    again.service = open_service(service_config(tmp_path, approach="pra"),
                                 lambda s: OarCtl(world.fake))
    again.driver = driver_for(again.service)
    again.channel = ChannelServer("127.0.0.1", 0)
    adapter = again.service.adapters["grid"]
    assert isinstance(adapter, SiteOar)
    again.adapter, adapter.channel, adapter.cluster.sleep = adapter, again.channel, lambda s: None
    again.cycle(2)
    assert again.service.manager.records["alice:a1"].sizes[-1][1] == 3
    session = again.connect(alice, "alice")
    assert adapter.request_shrink("alice:a1", 1, False) == 1
    assert session.requests[0] == {"op": "release", "ids": [grown[-1]]}
    assert [world.fake.jobs[i].state for i in grown] == ["Running", "Error"]
    again.service.close()
