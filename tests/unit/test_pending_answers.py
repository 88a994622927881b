"""Pending answers: a slow expansion runs in the adapter's worker, and the cycle goes on.

The fake Slurm site's ``salloc`` is held at a gate (a slow negotiation: the real one waits
seconds for nodes, then hands them over and confirms). With synchronous answers the cycle
that offers the grow waits at that gate; with pending answers it returns at once, the job
is shown ``growing``, other jobs are placed, and the answer (the new size, or a refusal)
arrives later as a job event.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path

import pytest

from malleable import faults
from malleable.adapters.pending import Negotiations
from malleable.adapters.shell import Result
from malleable.adapters.slurm.cluster import SlurmCluster
from malleable.adapters.slurm.ctl import SlurmCtl
from malleable.adapters.slurm.payload import Payload
from malleable.adapters.slurm.resize import Resizer
from malleable.clock import ScaledClock
from malleable.manager import Manager
from malleable.model import JobKind, JobSpec, JobState, SizeRule
from malleable.policies.koala import KoalaPolicy
from malleable.resources import PENDING
from malleable.store import Store, resume
from tests.fakes.slurm import FakeSlurm, node_names

RUN = "r1"
LIMIT = 3.0
"""Seconds a cycle may take here (it does no real I/O: a slow one waited at the gate)."""


class Gate:
    """A fake Slurm site run one command at a time, whose ``salloc`` waits until opened."""

    def __init__(self, fake: FakeSlurm) -> None:
        self.fake = fake
        self.lock = threading.Lock()
        self.opened = threading.Event()
        self.waiting = threading.Event()

    def run(self, argv: Sequence[str], timeout: float, *, input: str | None = None,
            check: bool = True) -> Result:
        if argv[0] == "salloc":
            self.waiting.set()
            self.opened.wait(10)
        with self.lock:
            return self.fake.run(argv, timeout, input=input, check=check)

    def close(self) -> None:
        pass


class Killed(BaseException):
    """Where the real hook would SIGKILL the manager."""


def _site(name: str, gate: Gate, store: Store | None, pending: bool = True) -> SlurmCluster:
    fake = gate.fake
    clock = ScaledClock(float(fake.now) - 100, 1.0, wall=lambda: float(fake.now))
    ctl = SlurmCtl(gate)  # type: ignore[arg-type]
    resizer = Resizer(ctl, run_tag=RUN, sleep=lambda s: None)
    return SlurmCluster(name, ctl, clock, RUN, Payload(0.01), resizer=resizer, journal=store,
                        negotiations=Negotiations(name) if pending else None,
                        pending_expansions=pending)


def _spec(job_id: str, kind: JobKind = JobKind.MALLEABLE, size: int = 2,
          max_size: int = 4) -> JobSpec:
    if kind is JobKind.RIGID:
        return JobSpec(job_id, kind, size, size, size, app="fixed")
    return JobSpec(job_id, kind, size, max_size, size, app="gadget2", size_rule=SizeRule.ANY)


def _cycle(manager: Manager, fakes: Sequence[FakeSlurm], now: float) -> None:
    """One cycle, in a thread: it must end within LIMIT seconds."""
    for fake in fakes:
        fake.now += 1
    errors: list[BaseException] = []

    def run() -> None:
        try:
            manager.cycle(now)
        except BaseException as exc:  # handed to the test
            errors.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(LIMIT)
    assert not thread.is_alive(), f"the cycle at {now} waited on a negotiation in flight"
    if errors:
        raise errors[0]


def _settle(site: SlurmCluster) -> None:
    assert site.negotiations is not None
    assert site.negotiations.wait(5.0) == [], "the negotiation did not end"


def _helpers(fake: FakeSlurm) -> list[int]:
    return [j.job_id for j in fake.jobs.values()
            if j.name == "m.helper" and j.state in ("RUNNING", "PENDING")]


def test_a_slow_expansion_does_not_hold_up_other_jobs_or_sites(tmp_path: Path) -> None:
    vu, uva = Gate(FakeSlurm(node_names(8))), Gate(FakeSlurm(node_names(6)))
    store = Store.open(tmp_path / "state.sqlite")
    sites = {"vu": _site("vu", vu, store), "uva": _site("uva", uva, store)}
    manager = Manager(KoalaPolicy.named("pra", "fpsma"), sites, journal=store)
    manager.submit(_spec("j0"))  # worst fit: vu (8 idle)
    _cycle(manager, [vu.fake, uva.fake], 0.0)
    assert manager.cluster_of("j0") == "vu"
    _cycle(manager, [vu.fake, uva.fake], 1.0)  # j0 runs: offered 2 more, salloc waits
    assert vu.waiting.wait(2.0), "no expansion was begun"
    assert manager.in_flight == {"j0": "grow"}
    assert not [op for op in manager.operations if op.kind == "grow"]  # not accepted yet

    view = sites["vu"].observe()
    assert view.running["j0"].growing == 2 and view.running["j0"].size == 2
    assert view.idle == 8 - 2 - 2  # the nodes being acquired are not idle

    manager.submit(_spec("j1", JobKind.RIGID, 3))
    manager.submit(_spec("j2", JobKind.RIGID, 4))
    _cycle(manager, [vu.fake, uva.fake], 2.0)
    _cycle(manager, [vu.fake, uva.fake], 3.0)
    assert manager.records["j1"].state is JobState.RUNNING  # placed meanwhile
    assert manager.records["j2"].state is JobState.RUNNING
    assert {manager.cluster_of("j1"), manager.cluster_of("j2")} == {"vu", "uva"}
    assert manager.in_flight == {"j0": "grow"}  # still in flight, offered nothing else
    assert manager.records["j0"].sizes[-1][1] == 2

    vu.opened.set()
    _settle(sites["vu"])
    _cycle(manager, [vu.fake, uva.fake], 4.0)
    assert manager.in_flight == {}
    assert manager.records["j0"].sizes[-1][1] == 4
    grows = [op for op in manager.operations if op.kind == "grow"]
    assert [(op.job_id, op.cluster, op.amount) for op in grows] == [("j0", "vu", 2)]
    journaled = [op for op in store.operations() if op.kind == "grow"]
    assert [(op.job_id, op.amount) for op in journaled] == [("j0", 2)]
    placed = {op.job_id: op.time for op in store.operations() if op.kind == "place"}
    assert journaled[0].time > max(placed.values())  # recorded when answered, not offered
    assert _helpers(vu.fake) == []
    assert store.intents("open") == []


def test_the_nodes_a_pending_grow_claims_are_not_offered_again_in_the_cycle(
        tmp_path: Path) -> None:
    """FPSMA offers the idle nodes to the oldest job first; its grow answers pending. The
    policy must hear what that grow claims, or it offers the same nodes to the next job and
    Slurm refuses one of the two after its salloc wait (the issue's over-offered grows)."""
    gate = Gate(FakeSlurm(node_names(8)))
    site = _site("vu", gate, None)
    manager = Manager(KoalaPolicy.named("pra", "fpsma"), {"vu": site})
    manager.submit(_spec("j0", max_size=8))
    manager.submit(_spec("j1", max_size=8))
    _cycle(manager, [gate.fake], 0.0)  # both placed at 2: 4 idle
    _cycle(manager, [gate.fake], 1.0)  # j0 offered the 4: pending; j1 offered nothing
    assert gate.waiting.wait(2.0)
    assert manager.in_flight == {"j0": "grow"}
    gate.opened.set()
    _settle(site)
    _cycle(manager, [gate.fake], 2.0)
    assert [(op.kind, op.job_id, op.amount) for op in manager.operations
            if op.kind == "grow"] == [("grow", "j0", 4)]
    assert sum(1 for c in gate.fake.calls if c[0] == "salloc") == 1


def test_the_synchronous_path_still_answers_at_once(tmp_path: Path) -> None:
    gate = Gate(FakeSlurm(node_names(8)))
    gate.opened.set()
    site = _site("vu", gate, None, pending=False)
    manager = Manager(KoalaPolicy.named("pra", "fpsma"), {"vu": site})
    manager.submit(_spec("j0"))
    _cycle(manager, [gate.fake], 0.0)
    _cycle(manager, [gate.fake], 1.0)
    assert manager.in_flight == {}
    assert [(op.kind, op.amount) for op in manager.operations] == [("place", 2), ("grow", 2)]


def test_a_refused_expansion_arrives_as_a_refusal(tmp_path: Path) -> None:
    gate = Gate(FakeSlurm(node_names(8)))
    store = Store.open(tmp_path / "state.sqlite")
    site = _site("vu", gate, store)
    manager = Manager(KoalaPolicy.named("pra", "fpsma"), {"vu": site}, journal=store)
    manager.submit(_spec("j0", max_size=8))
    _cycle(manager, [gate.fake], 0.0)
    _cycle(manager, [gate.fake], 1.0)
    assert gate.waiting.wait(2.0) and manager.in_flight == {"j0": "grow"}
    with gate.lock:
        gate.fake.add_job(6, user="alice")  # local users take the idle nodes meanwhile
    gate.opened.set()
    _settle(site)
    events = site.drain_events()
    assert [(e.answer, e.amount, e.size) for e in events] == [("grow", 0, 2)]
    assert "Resources" in events[0].reason or "nodes" in events[0].reason, events[0].reason
    for event in events:
        manager.on_event(event)
    assert manager.in_flight == {}
    assert [op.kind for op in manager.operations] == ["place"]  # no grow recorded
    assert manager.records["j0"].sizes == [(manager.records["j0"].sizes[0][0], 2)]
    assert _helpers(gate.fake) == []
    assert site.resizes[-1].outcome.value == "refused"


def test_a_second_offer_to_a_job_in_flight_is_not_sent(tmp_path: Path) -> None:
    gate = Gate(FakeSlurm(node_names(8)))
    site = _site("vu", gate, None)
    manager = Manager(KoalaPolicy.named("pra", "fpsma"), {"vu": site})
    manager.submit(_spec("j0", max_size=8))
    _cycle(manager, [gate.fake], 0.0)
    _cycle(manager, [gate.fake], 1.0)
    assert gate.waiting.wait(2.0)
    assert site.offer_grow("j0", 1) == 0  # the adapter: one negotiation per job
    assert site.request_shrink("j0", 1, False) == 0
    _cycle(manager, [gate.fake], 2.0)
    _cycle(manager, [gate.fake], 3.0)
    gate.opened.set()
    _settle(site)
    assert sum(1 for c in gate.fake.calls if c[0] == "salloc") == 1


def test_a_kill_during_a_pending_expansion_is_reconciled_on_restart(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    gate = Gate(FakeSlurm(node_names(8)))
    fake = gate.fake
    store = Store.open(tmp_path / "state.sqlite")
    killed = threading.Event()

    def reached(name: str) -> None:
        if name == "helper.granted":
            killed.set()
            raise Killed(name)

    monkeypatch.setattr(faults, "reached", reached)
    monkeypatch.setattr(threading, "excepthook", lambda args: None)  # the "killed" worker
    before = Manager(KoalaPolicy.named("pra", "fpsma"), {"vu": _site("vu", gate, store)},
                     journal=store)
    before.submit(_spec("j0"))
    _cycle(before, [fake], 0.0)
    _cycle(before, [fake], 1.0)
    assert before.in_flight == {"j0": "grow"}
    gate.opened.set()
    assert killed.wait(5.0)
    granted = _helpers(fake)
    assert granted, "the helper was granted before the kill"
    assert [i.kind for i in store.intents("open")] == ["helper"]
    monkeypatch.setattr(faults, "reached", lambda name: None)
    store.close()

    again = Store.open(tmp_path / "state.sqlite")
    site = _site("vu", gate, again)
    after = Manager(KoalaPolicy.named("pra", "fpsma"), {"vu": site}, journal=again)
    resume(again, after, after.clusters)
    _cycle(after, [fake], 10.0)  # the first poll rolls the helper back
    # the same cycle may offer the job a grow again: a new negotiation, with a helper of
    # its own (granted at once or not, as the worker thread is scheduled); let it end
    _settle(site)
    assert not set(granted) & set(_helpers(fake))
    assert [i for i in again.intents("open")] == []
    assert [op.kind for op in again.operations()].count("grow") == 0  # never accepted
    for _ in range(3):  # the job may grow again, once, through a new negotiation
        _cycle(after, [fake], 11.0 + _)
        _settle(site)
    assert after.records["j0"].sizes[-1][1] == 4
    assert [op.kind for op in again.operations()].count("grow") == 1
    slurm_id = again.slurm_ids()[("vu", "j0")]
    fake.finish(slurm_id)
    for step in range(20, 23):
        _cycle(after, [fake], float(step))
    assert after.records["j0"].state is JobState.COMPLETED
    assert _helpers(fake) == []


def test_pending_is_what_the_adapter_answers() -> None:
    gate = Gate(FakeSlurm(node_names(4)))
    site = _site("vu", gate, None)
    manager = Manager(KoalaPolicy.named("pra", "fpsma"), {"vu": site})
    manager.submit(_spec("j0"))
    _cycle(manager, [gate.fake], 0.0)
    site.drain_events()
    site.observe()
    assert site.offer_grow("j0", 2) == PENDING
    gate.opened.set()
    _settle(site)
    assert [(e.answer, e.amount, e.size) for e in site.drain_events()] == [("grow", 2, 4)]


def test_an_mpi_program_s_answers_are_pending_in_the_runner_s_site() -> None:
    """MpiSite over a SlurmCluster with negotiations: the program's answer to a grow and to
    a shrink (over its file channel, tests/fakes/mpi_slurm.py) comes back as events."""
    from tests.fakes.drivers import mpi_fake_driver

    driver = mpi_fake_driver()
    assert driver.slurm is not None
    driver.slurm.negotiations = Negotiations("vu")
    rm = driver.rm
    assert rm.start(driver.spec("a", 2), 2) == 2
    driver.wait(lambda: "a" in rm.observe().running, "a to run")
    driver.drain()
    assert rm.offer_grow("a", 2) == PENDING
    _settle(driver.slurm)
    grown = [e for e in rm.drain_events() if e.answer]
    assert [(e.answer, e.amount, e.size) for e in grown] == [("grow", 2, 4)]
    assert rm.observe().running["a"].size == 4
    assert rm.request_shrink("a", 1, False) == PENDING
    _settle(driver.slurm)
    shrunk = [e for e in rm.drain_events() if e.answer]
    assert [(e.answer, e.amount, e.size) for e in shrunk] == [("shrink", 1, 3)]
    assert rm.observe().running["a"].size == 3


def test_manager_run_and_serve_build_slurm_sites_that_answer_expansions_pending(
        tmp_path: Path) -> None:
    """What `manager run` (service.build_adapter) and `manager serve` (daemon.make_adapter)
    build: a plain job's grow offer on a Slurm site is answered PENDING."""
    from malleable.config import SiteConfig
    from malleable.service import build_adapter
    from malleable.site.adapter import SiteSlurm
    from malleable.site.assembly import make_adapter
    from malleable.store import RunInfo

    site = SiteConfig("vu")
    info = RunInfo(RUN, 0.0, 1.0, "pwa", "fpsma", "wm-prime")
    clock = ScaledClock(0.0, 1.0)
    store = Store.open(tmp_path / "run.sqlite")
    served = make_adapter(site, clock, info, store, lambda s: SlurmCtl(FakeSlurm(["n1"])))
    assert isinstance(served, SiteSlurm)  # the service's site wraps a Slurm adapter
    built = [build_adapter(site, clock, info, store), served.cluster]
    for adapter in built:
        assert isinstance(adapter, SlurmCluster)
        assert adapter.negotiations is not None and adapter.pending_expansions
        adapter.close()
    store.close()
