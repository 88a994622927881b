"""The manager's cycle (observe -> decide -> act -> record) against a scripted cluster."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pytest

from malleable.errors import MalleableError
from malleable.manager import Manager
from malleable.model import (
    Action,
    Cancel,
    Defer,
    Grow,
    JobKind,
    JobSpec,
    JobState,
    Operation,
    Place,
    Reject,
    Shrink,
    View,
)
from malleable.resources import JobEvent
from malleable.sim.cluster import SimCluster
from malleable.sim.engine import Engine
from tests.fakes.builders import mjob, rigid
from tests.fakes.scripted import RecordingJournal, ScriptedCluster, ScriptedPolicy, started


def once(*actions: Action) -> ScriptedPolicy:
    """A policy that yields ``actions`` in its first decision and nothing afterwards."""
    todo = [list(actions)]
    return ScriptedPolicy(lambda view, now: todo.pop() if todo else [])


def every_cycle(*actions: Action) -> ScriptedPolicy:
    return ScriptedPolicy(lambda view, now: list(actions))


def manager(policy: ScriptedPolicy, *jobs: str, max_tries: int | None = None,
            cluster: ScriptedCluster | None = None,
            journal: RecordingJournal | None = None) -> tuple[Manager, ScriptedCluster]:
    rm = cluster or ScriptedCluster()
    m = Manager(policy, {rm.name: rm}, max_tries=max_tries, journal=journal)
    for job_id in jobs:
        m.submit(mjob(job_id, lo=1, hi=8, init=2))
    return m, rm


def waiting_ids(view: View) -> list[str]:
    return [w.id for w in view.waiting]


# ------------------------------------------------------------------ placement and queue


def test_a_placed_job_leaves_the_queue_once_the_decision_is_done() -> None:
    policy = once(Place("a", "c", 2))
    m, rm = manager(policy, "a", "b")
    assert m.cycle(10.0) == 1
    assert policy.answers == [(Place("a", "c", 2), 2)]
    assert rm.verbs() == ["start"] and rm.calls[-1] == ("start", "a", 2)
    assert (m.waiting, m.unfinished, m.cluster_of("a")) == (1, 2, "c")
    record = m.records["a"]
    assert (record.state, record.placed, record.cluster) == (JobState.PENDING, 10.0, "c")
    assert m.operations == [Operation(10.0, "place", "a", "c", 2)]
    m.cycle(11.0)
    assert waiting_ids(policy.views[-1]) == ["b"]


def test_a_refused_placement_keeps_the_job_waiting_without_an_operation() -> None:
    policy = once(Place("a", "c", 2))
    m, _ = manager(policy, "a", cluster=ScriptedCluster(grants={"a": 0}))
    m.cycle(1.0)
    assert policy.answers == [(Place("a", "c", 2), 0)]
    assert (m.waiting, m.cluster_of("a"), m.operations) == (1, None, [])
    assert m.records["a"].state is JobState.WAITING


def test_the_size_granted_is_the_answer_and_the_operation() -> None:
    policy = once(Place("a", "c", 6))
    m, _ = manager(policy, "a", cluster=ScriptedCluster(grants={"a": 4}))
    m.cycle(1.0)
    assert policy.answers == [(Place("a", "c", 6), 4)]
    assert m.operations == [Operation(1.0, "place", "a", "c", 4)]


def test_defer_counts_a_try_per_decision() -> None:
    tries: list[list[tuple[str, int]]] = []  # the queue is a window valid during decide

    def script(view: View, now: float) -> Sequence[Action]:
        tries.append([(w.id, w.tries) for w in view.waiting])
        return [Defer("a")]

    m, _ = manager(ScriptedPolicy(script), "a", "b")
    for now in (1.0, 2.0, 3.0):
        m.cycle(now)
    assert tries == [[("a", 0), ("b", 0)], [("a", 1), ("b", 0)], [("a", 2), ("b", 0)]]
    assert m.operations == [] and m.waiting == 2


def test_max_tries_rejects_a_job_as_failed() -> None:
    policy = every_cycle(Defer("a"))
    m, rm = manager(policy, "a", max_tries=2)
    m.cycle(1.0)
    assert m.records["a"].state is JobState.WAITING and m.waiting == 1
    m.cycle(2.0)
    record = m.records["a"]
    assert (record.state, record.end, record.reason) == (JobState.FAILED, 2.0,
                                                         "not placed after 2 tries")
    assert (m.waiting, m.unfinished) == (0, 0)
    assert m.operations == [Operation(2.0, "reject", "a", "", 0)]
    assert rm.verbs() == []


def test_defer_of_a_job_placed_in_the_same_decision_counts_nothing() -> None:
    policy = once(Place("a", "c", 2), Defer("a"))
    m, _ = manager(policy, "a", max_tries=1)
    m.cycle(1.0)
    assert m.records["a"].state is JobState.PENDING and m.waiting == 0


# ------------------------------------------------------------------ grow and shrink


def test_grow_and_shrink_answers_go_back_into_the_policy() -> None:
    rm = ScriptedCluster(grow_answers={"a": 1}, shrink_answers={"a": 2})
    policy = once(Grow("a", 3), Shrink("a", 3, True), Shrink("a", 1))
    m, _ = manager(once(Place("a", "c", 2)), "a", cluster=rm)
    m.cycle(1.0)
    m.policy = policy
    m.cycle(2.0)
    assert policy.answers == [(Grow("a", 3), 1), (Shrink("a", 3, True), 2),
                              (Shrink("a", 1), 1)]
    assert rm.calls[-3:] == [("grow", "a", 3), ("shrink", "a", 3, True),
                             ("shrink", "a", 1, False)]
    assert m.operations[1:] == [Operation(2.0, "grow", "a", "c", 1),
                                Operation(2.0, "shrink", "a", "c", 2),
                                Operation(2.0, "shrink", "a", "c", 1)]


class _Ending:
    """A policy whose decision notes each answer, what follows its last yield and its end."""

    name = "ending"

    def __init__(self, actions: list[Action]) -> None:
        self.actions, self.log = actions, []  # type: list[Action], list[object]

    def decide(self, view: View, now: float) -> Any:
        try:
            for action in self.actions:
                self.log.append((yield action))
            self.log.append("after the last yield")
        finally:
            self.log.append("closed")


@pytest.mark.parametrize("actions", [[], [Grow("a", 3)], [Grow("a", 3), Shrink("a", 1)]])
def test_a_decision_runs_to_its_end_within_the_cycle(actions: list[Action]) -> None:
    rm = ScriptedCluster(grow_answers={"a": 1}, shrink_answers={"a": 1})
    m, _ = manager(once(Place("a", "c", 2)), "a", cluster=rm)
    m.cycle(1.0)
    policy = m.policy = _Ending(actions)
    assert m.cycle(2.0) == len(actions)
    assert policy.log == [1] * len(actions) + ["after the last yield", "closed"]


def test_a_none_action_is_refused_as_before_and_ends_nothing_quietly() -> None:
    """The cycle's end marker is an object no policy holds: a policy that yields None (a
    bug) still hears of it from ``_apply``, instead of its decision ending there quietly."""
    m, _ = manager(once(Place("a", "c", 2)), "a")
    m.cycle(1.0)
    m.policy = _Ending([None, Grow("a", 3)])  # type: ignore[list-item]
    # (the compiled build's own type check refuses it first: TypeError, as loud)
    with pytest.raises((MalleableError, TypeError), match=r"unknown action None|got None"):
        m.cycle(2.0)


class _Listing:
    """A policy whose decision is a plain list (a policy may return any iterable)."""

    name = "listing"

    def decide(self, view: View, now: float) -> list[Action]:
        return [Place(w.id, "c", 2) for w in view.waiting]


def test_a_plain_iterable_decision_is_applied_whole() -> None:
    m, rm = manager(every_cycle(), "a", "b")
    m.policy = _Listing()
    assert m.cycle(1.0) == 2
    assert [c[:2] for c in rm.calls if c[0] == "start"] == [("start", "a"), ("start", "b")]
    assert m.cycle(2.0) == 0


def test_a_grow_or_shrink_answered_0_is_no_operation() -> None:
    rm = ScriptedCluster(grow_answers={"a": 0}, shrink_answers={"a": 0})
    m, _ = manager(once(Place("a", "c", 2)), "a", cluster=rm)
    m.cycle(1.0)
    policy = once(Grow("a", 3), Shrink("a", 1))
    m.policy = policy
    m.cycle(2.0)
    assert [a for _, a in policy.answers] == [0, 0] and len(m.operations) == 1


def test_resizing_a_job_not_placed_or_by_nothing_answers_0_without_asking() -> None:
    m, rm = manager(once(Place("a", "c", 2)), "a", "w")
    m.cycle(1.0)
    policy = once(Grow("w", 2), Shrink("w", 1), Grow("a", 0), Shrink("a", 0), Grow("x", 1))
    m.policy = policy
    m.cycle(2.0)
    assert [a for _, a in policy.answers] == [0, 0, 0, 0, 0]
    assert rm.verbs() == ["start"]


# ------------------------------------------------------------------ cancel and reject


def test_cancelling_a_waiting_job_ends_it_without_the_cluster() -> None:
    policy = once(Cancel("a", "user asked"))
    m, rm = manager(policy, "a", "b")
    m.cycle(3.0)
    record = m.records["a"]
    assert (record.state, record.end, record.reason) == (JobState.CANCELLED, 3.0, "user asked")
    assert (m.waiting, m.unfinished) == (1, 1)
    assert rm.verbs() == [] and m.operations == [Operation(3.0, "cancel", "a", "", 0)]


def test_cancelling_a_running_job_goes_to_its_cluster_and_ends_with_its_event() -> None:
    m, rm = manager(once(Place("a", "c", 2)), "a")
    m.cycle(1.0)
    m.policy = once(Cancel("a"))
    m.cycle(2.0)
    assert rm.calls[-1] == ("cancel", "a")
    assert m.operations[-1] == Operation(2.0, "cancel", "a", "c", 0)
    assert m.records["a"].state is JobState.PENDING and m.unfinished == 1  # until the event
    rm.emit(JobEvent(2.5, "a", JobState.CANCELLED, 0, "cancelled"))
    m.cycle(3.0)
    assert (m.records["a"].state, m.records["a"].end, m.unfinished) == (
        JobState.CANCELLED, 2.5, 0)


def test_reject_fails_a_waiting_job_and_ignores_any_other() -> None:
    policy = once(Reject("a", "asks for 99 nodes"), Reject("nope", "?"))
    m, rm = manager(policy, "a")
    m.cycle(4.0)
    record = m.records["a"]
    assert (record.state, record.reason) == (JobState.FAILED, "asks for 99 nodes")
    assert (m.waiting, m.unfinished) == (0, 0)
    assert m.operations == [Operation(4.0, "reject", "a", "", 0)]
    assert rm.verbs() == [] and policy.answers[1] == (Reject("nope", "?"), None)


def test_reject_of_a_job_placed_in_the_same_decision_is_ignored() -> None:
    m, _ = manager(once(Place("a", "c", 2), Reject("a", "too late")), "a")
    m.cycle(1.0)
    record = m.records["a"]
    assert record.state is JobState.PENDING and m.unfinished == 1
    assert [op.kind for op in m.operations] == ["place"]


# ------------------------------------------------------------------ events and journal


def test_events_are_drained_into_the_records_before_the_policy_decides() -> None:
    policy = every_cycle()
    m, rm = manager(policy, "a")
    m.policy = once(Place("a", "c", 2))
    m.cycle(1.0)
    for event in (started("a", 1.5, 2), started("a", 2.0, 4),
                  JobEvent(3.0, "a", JobState.COMPLETED, 0), started("ghost", 1.0, 1)):
        rm.emit(event)
    m.policy = policy
    m.cycle(4.0)
    record = m.records["a"]
    assert (record.start, record.end, record.state) == (1.5, 3.0, JobState.COMPLETED)
    assert record.sizes == [(1.5, 2), (2.0, 4)]
    assert m.unfinished == 0 and "ghost" not in m.records
    drain, observe = rm.calls.index(("drain",), 2), rm.calls.index(("observe",), 2)
    assert drain < observe  # one cycle: events first, then the view


def test_the_journal_sees_submissions_operations_and_events_in_order() -> None:
    journal = RecordingJournal()
    rm = ScriptedCluster()
    m, _ = manager(once(Place("a", "c", 2), Cancel("b")), "a", "b", cluster=rm,
                   journal=journal)
    m.cycle(1.0)
    rm.emit(started("a", 1.5, 2))
    rm.emit(started("ghost", 1.5, 2))  # not the manager's: not journalled
    m.policy = once(Grow("a", 2))
    m.cycle(2.0)
    assert journal.calls == [
        ("submitted", "a"), ("submitted", "b"),
        ("operation", Operation(1.0, "place", "a", "c", 2)),
        ("operation", Operation(1.0, "cancel", "b", "", 0)),
        ("event", started("a", 1.5, 2)),
        ("operation", Operation(2.0, "grow", "a", "c", 2)),
    ]


def test_submitting_a_job_twice_is_an_error() -> None:
    m, _ = manager(every_cycle(), "a")
    with pytest.raises(MalleableError, match="already submitted"):
        m.submit(rigid("a"))


# ------------------------------------------------------------------ policy mistakes


@dataclass(frozen=True)
class Dance(Action):
    step: int


def test_an_unknown_action_raises() -> None:
    m, _ = manager(once(Dance(1)), "a")
    with pytest.raises(MalleableError, match="unknown action Dance"):
        m.cycle(1.0)


def test_placing_a_job_that_is_not_waiting_is_ignored_with_a_warning(
        caplog: pytest.LogCaptureFixture) -> None:
    policy = once(Place("a", "c", 2), Place("a", "c", 2), Place("zz", "c", 1))
    m, rm = manager(policy, "a")
    with caplog.at_level(logging.WARNING, logger="malleable.manager"):
        m.cycle(1.0)
    assert [a for _, a in policy.answers] == [2, 0, 0]
    assert [c for c in rm.calls if c[0] == "start"] == [("start", "a", 2)]
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == ["policy placed a, which is not waiting",
                        "policy placed zz, which is not waiting"]


def test_the_view_does_not_change_while_the_policy_decides() -> None:
    seen: list[tuple[list[tuple[str, int]], dict[str, object]]] = []

    def snapshot(view: View) -> None:
        clusters = {n: (c.idle, dict(c.running)) for n, c in view.clusters.items()}
        seen.append(([(w.id, w.tries) for w in view.waiting], clusters))

    def script(view: View, now: float) -> Sequence[Action]:
        snapshot(view)
        return [Place("a", "c", 2), Cancel("b"), Reject("c", "never"), Defer("d"),
                Grow("a", 1)]

    policy = ScriptedPolicy(script, during=snapshot)
    m, rm = manager(policy, "a", "b", "c", "d")
    m.cycle(1.0)
    assert len(seen) == 6 and all(s == seen[0] for s in seen)
    assert seen[0][0] == [("a", 0), ("b", 0), ("c", 0), ("d", 0)]
    assert rm.calls.count(("observe",)) == 1
    assert [w.id for w in m._queue.values()] == ["d"] and m._queue["d"].tries == 1


def test_a_command_failing_on_one_site_marks_it_offline_and_the_cycle_goes_on() -> None:
    from malleable.errors import ExternalError
    from malleable.policies.factories import fcfs

    class Refusing:
        """Site a: a SimCluster whose starts time out (a wrapper, not a patched method: the
        compiled build's classes, setup.py, take neither a patched method nor a subclass)."""

        def __init__(self, inner: SimCluster) -> None:
            self._inner = inner

        def __getattr__(self, name: str) -> Any:
            return getattr(self._inner, name)

        def start(self, spec: JobSpec, size: int) -> int:
            raise ExternalError("sbatch on a: timed out")

    a, b = Refusing(SimCluster("a", 4, Engine())), SimCluster("b", 4, Engine())
    manager = Manager(fcfs(), {"a": a, "b": b})
    for i in range(3):
        manager.submit(JobSpec(f"j{i}", JobKind.RIGID, 2, 2, 2, app="fixed", runtime=10.0))
    manager.cycle(0.0)
    assert not manager.health["a"].online and manager.health["a"].failures == 1
    assert manager.waiting == 3  # FCFS waits when its head is refused
    view = manager.last_view
    assert view is not None and view.clusters["a"].online
    manager.cycle(1.0)  # a is backed off: offline in the view, nothing tried there
    assert manager.last_view is not None and not manager.last_view.clusters["a"].online
    assert manager.last_view.clusters["a"].nodes == 4  # its last known size
    assert [manager.cluster_of(f"j{i}") for i in range(3)] == ["b", "b", None]
    assert manager.health["a"].failures == 1  # not tried again while backed off
