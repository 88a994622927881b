"""Drivers of the ResourceManager contract suite (tests/contract/).

A driver wraps one implementation and knows how to make time pass on it (the
simulator's engine, the fake Slurm's clock, the wall clock of the testbed) and how to
make its world do what a test needs (a job vanishing from the queue...). The same
test body then runs on every implementation. A driver keeps every event it drained
(``seen``), since :meth:`ResourceManager.drain_events` hands each out only once.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from malleable.adapters.oar.cluster import OarCluster
from malleable.adapters.oar.ctl import OarCtl
from malleable.adapters.oar.payload import OarPayload
from malleable.adapters.slurm.cluster import SlurmCluster
from malleable.adapters.slurm.ctl import SlurmCtl
from malleable.adapters.slurm.payload import Payload
from malleable.adapters.slurm.resize import Resizer
from malleable.clock import ScaledClock
from malleable.model import JobKind, JobSpec, JobState
from malleable.resources import Capability, JobEvent, ResourceManager
from malleable.runner.launch import Launch
from malleable.runner.nodes import NodeShell
from malleable.runner.site import MpiSite
from malleable.sim.cluster import SimCluster
from malleable.sim.engine import Engine
from tests.fakes.mpi_slurm import FakeMpiSlurm
from tests.fakes.oar import FakeOar
from tests.fakes.slurm import FakeSlurm, node_names

NODES = 4
"""Nodes of every driven cluster (the testbed site ``vu`` of the small topology has 4)."""


@dataclass
class Driver:
    """What the contract tests need from an implementation (see the module docstring)."""

    kind: str
    rm: ResourceManager
    nodes: int = NODES
    seen: list[JobEvent] = field(default_factory=list)
    patience: int = 30
    """How many ticks :meth:`wait` allows before failing the test."""

    def spec(self, job_id: str, size: int = 2, *, malleable: bool = True,
             low: int = 1, high: int = NODES) -> JobSpec:
        """A job that runs far longer than any test (the testbed cancels it at teardown)."""
        if not malleable:
            return JobSpec(job_id, JobKind.RIGID, size, size, size, app="fixed",
                           runtime=3600.0)
        return JobSpec(job_id, JobKind.MALLEABLE, low, high, size, app="fixed",
                       runtime=3600.0)

    def tick(self) -> None:
        """Let a little time pass (one second of the implementation's clock)."""
        raise NotImplementedError

    def drain(self) -> list[JobEvent]:
        events = list(self.rm.drain_events())
        self.seen.extend(events)
        return events

    def wait(self, predicate: Callable[[], bool], what: str) -> None:
        """Tick (draining events into ``seen``) until ``predicate`` holds."""
        for _ in range(self.patience):
            self.drain()
            if predicate():
                return
            self.tick()
        pytest.fail(f"{self.kind}: {what} did not happen within {self.patience} ticks")

    def size_of(self, job_id: str) -> int | None:
        job = self.rm.observe().running.get(job_id)
        return None if job is None else job.size

    def wait_size(self, job_id: str, size: int) -> None:
        self.wait(lambda: self.size_of(job_id) == size, f"{job_id} at {size} nodes")

    def ended(self, job_id: str) -> JobEvent | None:
        return next((e for e in self.seen if e.job_id == job_id and e.state.finished), None)

    def wait_end(self, job_id: str) -> JobEvent:
        self.wait(lambda: self.ended(job_id) is not None, f"the end of {job_id}")
        event = self.ended(job_id)
        assert event is not None
        return event

    def declare(self, capabilities: frozenset[Capability]) -> None:
        """Make the implementation declare ``capabilities`` (a configured site)."""
        self.rm.capabilities = capabilities

    def vanish(self, job_id: str) -> None:
        """Make a job leave the resource manager's queue and accounting, end unknown."""
        pytest.skip(f"{self.kind}: a job cannot leave this resource manager unseen")

    def teardown(self) -> None:
        """Cancel what the test left running and close the implementation."""
        self.rm.close()


# ---------------------------------------------------------------- the simulator


@dataclass
class SimDriver(Driver):
    engine: Engine = field(default_factory=Engine)

    def tick(self) -> None:
        until = self.engine.now + 1.0
        self.engine.at(until, lambda: None)
        self.engine.run(until=until)


def sim_driver() -> SimDriver:
    engine = Engine(100.0)
    cluster = SimCluster("sim", NODES, engine, release_delay=2.0)
    return SimDriver("sim", cluster, engine=engine)


# ---------------------------------------------------------------- the fake Slurm


@dataclass
class FakeSlurmDriver(Driver):
    fake: FakeSlurm = field(default_factory=lambda: FakeSlurm(node_names(NODES)))
    slurm: SlurmCluster | None = None

    def tick(self) -> None:
        self.fake.now += 1

    def declare(self, capabilities: frozenset[Capability]) -> None:
        assert self.slurm is not None
        self.slurm.capabilities = capabilities

    def vanish(self, job_id: str) -> None:
        assert self.slurm is not None
        slurm_id = self.slurm.slurm_id(job_id)
        assert slurm_id is not None
        del self.fake.jobs[slurm_id]  # out of squeue and of sacct: its end is unknown


def _fake_slurm_cluster(fake: FakeSlurm) -> SlurmCluster:
    clock = ScaledClock(float(fake.now), 1.0, wall=lambda: float(fake.now))
    run = "contract"
    resizer = Resizer(SlurmCtl(fake), run_tag=run, sleep=lambda s: None)
    return SlurmCluster("vu", SlurmCtl(fake), clock, run, Payload(0.01), resizer=resizer)


def slurm_fake_driver() -> FakeSlurmDriver:
    fake = FakeSlurm(node_names(NODES))
    cluster = _fake_slurm_cluster(fake)
    return FakeSlurmDriver("slurm-fake", cluster, fake=fake, slurm=cluster)


def mpi_fake_driver() -> FakeSlurmDriver:
    """MpiSite over a SlurmCluster on the fake Slurm; every job is an MPI program that
    answers offers through its channel (tests/fakes/mpi_slurm.py)."""
    fake = FakeMpiSlurm(node_names(NODES))
    cluster = _fake_slurm_cluster(fake)
    site = MpiSite(cluster, NodeShell(fake), lambda spec: Launch("app.py", "print(1)\n"),
                   start_timeout=0.0)
    return FakeSlurmDriver("mpi-fake", site, fake=fake, slurm=cluster)


def mpi_sleepers_driver() -> FakeSlurmDriver:
    """MpiSite over a SlurmCluster on the fake Slurm; no job is an MPI program, so every
    call goes through MpiSite to the wrapped cluster."""
    fake = FakeSlurm(node_names(NODES))
    cluster = _fake_slurm_cluster(fake)
    site = MpiSite(cluster, NodeShell(fake), lambda spec: None)
    return FakeSlurmDriver("mpi-fake-sleepers", site, fake=fake, slurm=cluster)


# ---------------------------------------------------------------- the fake OAR


@dataclass
class FakeOarDriver(Driver):
    fake: FakeOar = field(default_factory=lambda: FakeOar(node_names(NODES)))

    def tick(self) -> None:
        self.fake.now += 1

    def vanish(self, job_id: str) -> None:
        assert isinstance(self.rm, OarCluster)
        base = self.rm.native_id(job_id)
        assert base is not None
        del self.fake.jobs[base]  # gone from oarstat, even with -j: its end is unknown


def oar_fake_driver() -> FakeOarDriver:
    fake = FakeOar(node_names(NODES))
    clock = ScaledClock(float(fake.now), 1.0, wall=lambda: float(fake.now))
    cluster = OarCluster("grid", OarCtl(fake), clock, "contract", OarPayload(0.01),
                         sleep=lambda s: None)
    return FakeOarDriver("oar-fake", cluster, fake=fake)


# ---------------------------------------------------------------- the testbed


@dataclass
class TestbedDriver(Driver):
    __test__ = False  # not a test class, whatever its name

    testbed: Any = None
    slurm: SlurmCluster | None = None
    interval: float = 0.5
    timeout: float = 60.0
    waited: list[tuple[float, str]] = field(default_factory=list)
    """(seconds, what) of every :meth:`wait` that ended, for the margin over ``timeout``."""

    def tick(self) -> None:
        time.sleep(self.interval)  # one poll interval; wait() bounds the whole on a deadline

    def wait(self, predicate: Callable[[], bool], what: str) -> None:
        began = time.monotonic()
        deadline = began + self.timeout
        while True:
            self.drain()
            if predicate():
                self.waited.append((time.monotonic() - began, what))
                return
            if time.monotonic() >= deadline:
                pytest.fail(f"{self.kind}: timed out after {self.timeout:g} s waiting for {what}"
                            f"; the site showed: {self.describe()}")
            self.tick()

    def describe(self) -> str:
        """What the site shows now (its queue, the adapter's view), for a failed wait."""
        try:
            view = self.rm.observe()
            seen = (f"idle {view.idle} of {view.nodes}, running "
                    f"{[(j, r.size) for j, r in view.running.items()]}, pending {view.pending}")
        except Exception as exc:  # a report, never a second failure
            seen = f"observe failed: {exc!r}"
        return f"{seen}; queue {self.queue_text()[-2000:]!r}"

    def queue_text(self) -> str:
        return str(self.testbed.exec("vu", ["squeue", "-h", "-o", "%i %j %T %D %r"]).stdout)

    def report_waits(self) -> None:
        """Print the longest waits (pytest shows them with -s, or with a failure)."""
        longest = sorted(self.waited, reverse=True)[:3]
        print(f"{self.kind}: {len(self.waited)} waits, longest "
              f"{[(round(s, 1), what) for s, what in longest]} (timeout {self.timeout:g} s)")

    def declare(self, capabilities: frozenset[Capability]) -> None:
        assert self.slurm is not None
        self.slurm.capabilities = capabilities

    def teardown(self) -> None:
        assert self.slurm is not None
        ids = [self.slurm.slurm_id(j) for j in list(self.slurm._mine)]
        for slurm_id in ids:
            if slurm_id is not None:
                self.testbed.exec("vu", ["scancel", str(slurm_id)])
        try:
            self.wait(lambda: self._all_ended(ids), "the contract's jobs to leave the queue")
        finally:
            self.report_waits()
            self.rm.close()

    def _all_ended(self, ids: list[int | None]) -> bool:
        out = self.testbed.exec("vu", ["squeue", "-h", "-o", "%i", "-t", "PD,R,CG,CF"],
                                check=True).stdout
        live = {line.strip() for line in out.splitlines()}
        return not any(str(i) in live for i in ids if i is not None)


def testbed_driver(testbed: Any, workdir: Path, rest: bool = False) -> TestbedDriver:
    """A SlurmCluster on site ``vu`` of a testbed that is up, with a run tag of its own
    (through slurmrestd with ``rest``: the config holds no SSH key)."""
    from malleable import kinds
    from malleable.config import load_config
    from tests.fakes.waits import clear_selection

    if not rest:  # (REST declares no EXPAND on 22.05: it makes no hand-over)
        # The contract's previous driver on this testbed may have left Slurm 22.05's
        # select/linear bug behind (a hand-over, a shrink, a job on the released node, both
        # cancelled: docs/slurm.md); seen in CI as site-slurm-testbed's grow refused for
        # "Resources" with a node idle, right after slurm-testbed's run of the same test.
        clear_selection(testbed, "vu")
    path = workdir / "clusters.toml"
    path.write_text(testbed.config_toml(rest=rest))
    config = load_config(path).site("vu")
    assert (config.rest is not None and config.ssh is None) if rest else config.ssh is not None
    cluster = SlurmCluster("vu", kinds.commands(config), ScaledClock(time.time(), 1.0),
                           f"ct{secrets.token_hex(3)}", Payload(time_scale=1.0))
    kind = "slurm-rest-testbed" if rest else "slurm-testbed"
    return TestbedDriver(kind, cluster, testbed=testbed, slurm=cluster)


@dataclass
class OarTestbedDriver(TestbedDriver):
    """An OarCluster on site ``grid`` (OAR) of a testbed that is up."""

    __test__ = False
    oar: OarCluster | None = None
    site: str = "grid"
    timeout: float = 180.0
    """OAR starts and ends jobs in scheduler rounds: at load 20-60 (issue 37's ci2 note)
    waits of 58.3 and 59.0 s passed and one went past 60 s, and the old 60-s deadline failed
    6 tests at load 80-118. 3x the longest wait measured to succeed."""

    def declare(self, capabilities: frozenset[Capability]) -> None:
        assert self.oar is not None
        self.oar.capabilities = capabilities

    def teardown(self) -> None:
        try:
            ids = self._live()
            if ids:
                self.testbed.exec(self.site, ["oardel", *map(str, ids)], user="malleable")
            self.wait(lambda: not self._live(), "the contract's OAR jobs to end")
        finally:
            self.report_waits()
            self.rm.close()

    def queue_text(self) -> str:
        return str(self.testbed.exec(self.site, ["oarstat", "-f", "-J"]).stdout)

    def _live(self) -> list[int]:
        import json

        out = self.testbed.exec(self.site, ["oarstat", "-J"], check=True).stdout
        return [int(k) for k in json.loads(out or "{}")]


def oar_testbed_driver(testbed: Any, workdir: Path, site: str = "grid") -> OarTestbedDriver:
    """An OarCluster on OAR site ``site`` of a testbed that is up, with a run tag of its own."""
    from malleable.adapters.oar.sites import oar_ctl_for
    from malleable.config import load_config

    path = workdir / "clusters.toml"
    path.write_text(testbed.config_toml())
    config = load_config(path).site(site)
    cluster = OarCluster(site, oar_ctl_for(config), ScaledClock(time.time(), 1.0),
                         f"ct{secrets.token_hex(3)}", OarPayload(time_scale=1.0))
    return OarTestbedDriver("oar-testbed", cluster, testbed=testbed, oar=cluster, site=site)


FACTORIES: dict[str, Callable[[], Driver]] = {
    "oar-fake": oar_fake_driver,
    "sim": sim_driver,
    "slurm-fake": slurm_fake_driver,
    "mpi-fake": mpi_fake_driver,
    "mpi-fake-sleepers": mpi_sleepers_driver,
}


STATES_AFTER_CANCEL = frozenset({JobState.CANCELLED, JobState.FAILED, JobState.TIMEOUT})
