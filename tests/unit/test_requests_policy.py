"""HonourRequests: applications' grow requests granted as voluntary grows from free nodes."""

from __future__ import annotations

from collections.abc import Generator
from dataclasses import dataclass, field, replace
from types import MappingProxyType

from malleable.manager import Manager
from malleable.model import (
    Action,
    ClusterView,
    Defer,
    Grow,
    Place,
    RunningJob,
    Shrink,
    SizeRule,
    View,
    WaitingJob,
)
from malleable.policies.dmr import DmrPolicy
from malleable.policies.fcfs import FCFS
from malleable.policies.requests import HonourRequests, grant, honour_requests, requested_size
from malleable.resources import Capability
from malleable.sim.cluster import SimCluster
from malleable.sim.engine import Engine
from tests.fakes.builders import by_spec, cluster, drive, mjob, rigid, running


def asking(job: RunningJob, target: float) -> RunningJob:
    return replace(job, feedback=MappingProxyType({"requested": target}))


def view(*clusters: ClusterView, waiting: tuple[WaitingJob, ...] = ()) -> View:
    return View(0.0, {c.name: c for c in clusters}, waiting)


def accept_all(action: Action) -> int | None:
    if isinstance(action, Grow):
        return action.offer
    if isinstance(action, Place):
        return action.size
    if isinstance(action, Shrink):
        return action.amount
    return None


def grows(log: list[tuple[Action, object]]) -> list[Grow]:
    return [a for a, _ in log if isinstance(a, Grow)]


def test_a_request_is_granted_from_free_nodes_by_a_policy_that_never_grows() -> None:
    a = asking(running(mjob("a", 1, 8, 2), 2, 0.0), 5)
    log = drive(HonourRequests(FCFS()).decide(view(cluster("c", 10, [a])), 0.0), accept_all)
    assert grows(log) == [Grow("a", 3)]


def test_the_grant_is_capped_by_the_free_nodes_the_maximum_and_the_size_rule() -> None:
    a = asking(running(mjob("a", 1, 8, 2), 2, 0.0), 7)
    assert grant(a, 2) == 2  # only 2 free: 2 -> 4
    big = asking(running(mjob("b", 1, 6, 2), 2, 0.0), 40)
    assert grant(big, 30) == 4  # asked 40, max 6
    pow2 = asking(running(mjob("f", 1, 16, 2, rule=SizeRule.POW2), 2, 0.0), 8)
    assert grant(pow2, 5) == 2  # 2 + 5 = 7 -> 4 (largest power of two)
    assert grant(pow2, 1) == 0  # 3 is no power of two: nothing to offer
    log = drive(HonourRequests(FCFS()).decide(view(cluster("c", 7, [pow2])), 0.0), accept_all)
    assert grows(log) == [Grow("f", 2)]


def test_no_grant_without_a_request_or_for_a_request_at_or_below_the_size() -> None:
    plain = running(mjob("a", 1, 8, 2), 2, 0.0)
    done = asking(running(mjob("b", 1, 8, 2), 4, 1.0), 4)
    assert requested_size(plain) is None and requested_size(done) == 4
    log = drive(HonourRequests(FCFS()).decide(view(cluster("c", 20, [plain, done])), 0.0),
                accept_all)
    assert log == []


def test_free_nodes_a_waiting_job_could_start_on_are_not_given_away() -> None:
    a = asking(running(mjob("a", 1, 8, 2), 2, 0.0), 8)
    c = cluster("c", 6, [a])  # 4 free
    waiting = (WaitingJob(rigid("w", 3)),)
    policy = HonourRequests(_Idle())  # an inner policy that places nothing
    log = drive(policy.decide(view(c, waiting=waiting), 0.0), accept_all)
    assert grows(log) == [Grow("a", 1)]  # 3 of the 4 stay for the waiting job
    too_big = (WaitingJob(rigid("w", 5)),)  # cannot start on 4: does not hold them back
    log = drive(policy.decide(view(c, waiting=too_big), 0.0), accept_all)
    assert grows(log) == [Grow("a", 4)]


def test_a_job_the_inner_policy_placed_no_longer_holds_nodes_back() -> None:
    a = asking(running(mjob("a", 1, 8, 2), 2, 0.0), 8)
    c = cluster("c", 10, [a])  # 8 free
    waiting = (WaitingJob(rigid("w", 3)),)
    log = drive(HonourRequests(FCFS()).decide(view(c, waiting=waiting), 0.0), accept_all)
    assert log[0] == (Place("w", "c", 3), 3)
    assert grows(log) == [Grow("a", 5)]  # 8 free - 3 placed


def test_not_granted_beyond_what_is_free_oldest_request_first() -> None:
    old = asking(running(mjob("old", 1, 8, 2), 2, 0.0), 6)
    young = asking(running(mjob("young", 1, 8, 2), 2, 5.0), 6)
    c = cluster("c", 9, [young, old])  # 5 free
    log = drive(HonourRequests(FCFS()).decide(view(c), 0.0), accept_all)
    assert grows(log) == [Grow("old", 4), Grow("young", 1)]


def test_a_grant_the_job_declines_leaves_the_nodes_for_the_next() -> None:
    a = asking(running(mjob("a", 1, 8, 2), 2, 0.0), 4)
    b = asking(running(mjob("b", 1, 8, 2), 2, 1.0), 4)
    c = cluster("c", 6, [a, b])  # 2 free
    log = drive(HonourRequests(FCFS()).decide(view(c), 0.0),
                lambda act: 0 if isinstance(act, Grow) and act.job_id == "a" else accept_all(act))
    assert [(a.job_id, ans) for a, ans in log] == [("a", 0), ("b", 2)]


def test_jobs_growing_releasing_or_resized_by_the_inner_policy_are_left_alone() -> None:
    base = asking(running(mjob("g", 1, 8, 2), 2, 0.0), 6)
    growing = replace(base, growing=1)
    releasing = replace(asking(running(mjob("r", 1, 8, 2), 3, 0.0), 6), releasing=1)
    log = drive(HonourRequests(FCFS()).decide(view(cluster("c", 20, [growing, releasing])),
                                              0.0), accept_all)
    assert log == []
    # DMR grows a below-preferred job on its own: the request adds nothing on top
    a = asking(running(mjob("a", 1, 8, 2), 2, 0.0), 8)
    log = drive(HonourRequests(DmrPolicy()).decide(view(cluster("c", 5, [a])), 0.0),
                accept_all)
    assert grows(log) == [Grow("a", 3)]


def test_answers_reach_the_inner_policy_unchanged() -> None:
    inner = _Recorder()
    a = asking(running(mjob("a", 1, 8, 2), 2, 0.0), 4)
    specs = {"a": a.spec}
    sizes = {"a": 2}
    log = drive(HonourRequests(inner).decide(view(cluster("c", 8, [a])), 0.0),
                by_spec(specs, sizes))
    assert inner.answers == [2, 1, None]  # Grow 2 accepted, Shrink 1 released, Defer
    # the inner policy grew a by 2 then shrank it: the request is not honoured on top
    assert grows(log) == [Grow("a", 2)]


def test_the_wrapper_keeps_the_inner_name_and_wraps_once() -> None:
    policy = honour_requests(FCFS())
    assert policy.name == "fcfs"
    assert honour_requests(policy) is policy


def test_the_manager_wraps_its_policy_when_a_cluster_reports_feedback() -> None:
    engine = Engine()
    sim = SimCluster("c", 8, engine)
    assert isinstance(Manager(FCFS(), {"c": sim}).policy, FCFS)  # no requests can come
    wrapped = Manager(FCFS(), {"c": _Asking(sim, {})}).policy
    assert isinstance(wrapped, HonourRequests) and wrapped.name == "fcfs"


def test_the_manager_grants_a_request_through_the_cluster() -> None:
    engine = Engine()
    sim = SimCluster("c", 8, engine)
    asked = _Asking(sim, {})
    manager = Manager(FCFS(), {"c": asked})
    manager.submit(mjob("a", 1, 8, 2))
    manager.cycle(0.0)
    assert sim.observe().running["a"].size == 2
    manager.cycle(0.5)  # no request yet: FCFS alone leaves the 6 free nodes free
    assert sim.observe().running["a"].size == 2
    asked.asked["a"] = 6
    manager.cycle(1.0)
    assert sim.observe().running["a"].size == 6
    assert [(op.kind, op.job_id, op.amount) for op in manager.operations] == [
        ("place", "a", 2), ("grow", "a", 4)]


@dataclass(frozen=True)
class _Idle:
    name: str = "idle"

    def decide(self, view: View, now: float) -> list[Action]:
        return []


@dataclass
class _Recorder:
    """Grows a by 2, shrinks it by 1, defers; records the answers it receives."""

    name: str = "recorder"
    answers: list[int | None] = field(default_factory=list)

    def decide(self, view: View, now: float) -> Generator[Action, int | None, None]:
        self.answers.append((yield Grow("a", 2)))
        self.answers.append((yield Shrink("a", 1)))
        self.answers.append((yield Defer("x")))


@dataclass
class _Asking:
    """A simulated cluster whose applications ask for sizes (as MpiSite shows them)."""

    sim: SimCluster
    asked: dict[str, int]
    capabilities: frozenset[Capability] = frozenset({Capability.FEEDBACK})

    def __getattr__(self, name: str) -> object:
        return getattr(self.sim, name)

    def observe(self) -> ClusterView:
        view = self.sim.observe()
        running = {k: asking(j, self.asked[k]) if k in self.asked else j
                   for k, j in view.running.items()}
        return replace(view, running=MappingProxyType(running))
