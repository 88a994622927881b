"""FCFS with EASY backfilling: start ranges, reservations, and that the head is never delayed."""

from __future__ import annotations

import math
import random
from collections.abc import Generator
from dataclasses import dataclass, field

import pytest

from malleable.model import (
    Action,
    Cluster,
    JobKind,
    JobSpec,
    Place,
    Reject,
    View,
    WaitingJob,
)
from malleable.policies.base import Policy
from malleable.policies.easy import (
    EasyPolicy,
    Plan,
    easy,
    start_size,
    submission_range,
)
from malleable.policies.registry import make
from malleable.sim.run import simulate
from tests.fakes.builders import cluster, drive, running


def job(job_id: str, size: int, runtime: float, submit: float = 0.0, *,
        kind: JobKind = JobKind.RIGID, low: int | None = None,
        walltime: float | None = -1.0) -> JobSpec:
    """A 'fixed' job (same run time at any size); walltime -1 means exact."""
    lo = size if low is None else low
    return JobSpec(job_id, kind, lo, size, lo, submit_time=submit, app="fixed", runtime=runtime,
                   walltime=runtime if walltime == -1.0 else walltime)


def view(jobs: list[JobSpec], nodes: int, busy: list[tuple[JobSpec, int, float]],
         now: float = 0.0) -> View:
    return View(now, {"c": cluster("c", nodes, [running(s, n, t) for s, n, t in busy])},
                [WaitingJob(j) for j in jobs])


def places(log: list[tuple[Action, object]]) -> list[tuple[str, int]]:
    return [(a.job_id, a.size) for a, _ in log if isinstance(a, Place)]


def answer_all(action: Action) -> int | None:
    return action.size if isinstance(action, Place) else None


# ------------------------------------------------------------------ ranges and start sizes


def test_submission_ranges_of_the_four_kinds_of_table_3() -> None:
    fixed = JobSpec("f", JobKind.RIGID, 32, 32, 32)
    moldable = JobSpec("m", JobKind.MOLDABLE, 2, 32, 2)
    flexible = JobSpec("x", JobKind.MALLEABLE, 2, 32, 2, preferred_size=16)
    pure_malleable = JobSpec("p", JobKind.MALLEABLE, 2, 32, 32, preferred_size=16)
    assert [submission_range(s) for s in (fixed, moldable, flexible, pure_malleable)] == [
        (32, 32), (2, 32), (2, 32), (32, 32)]
    assert [start_size(s, 10) for s in (fixed, moldable, flexible, pure_malleable)] == [
        0, 10, 10, 0]
    assert [start_size(s, 40) for s in (fixed, moldable, flexible, pure_malleable)] == [
        32, 32, 32, 32]
    assert start_size(moldable, 1) == 0


# ------------------------------------------------------------------ hand-checked cycles


def test_jobs_start_in_order_while_they_fit() -> None:
    jobs = [job("a", 4, 10), job("b", 3, 10), job("c", 2, 10)]
    log = drive(EasyPolicy().decide(view(jobs, 8, []), 0.0), answer_all)
    assert places(log) == [("a", 4), ("b", 3)]  # one node left: c (2 nodes) waits


def test_a_short_job_backfills_before_the_shadow_time() -> None:
    # 10 nodes, 6 busy until t=100: 4 free. Head needs 8 -> shadow 100, extra 2.
    hog = job("hog", 6, 100)
    jobs = [job("head", 8, 50), job("short", 4, 90), job("long", 4, 500)]
    log = drive(EasyPolicy().decide(view(jobs, 10, [(hog, 6, 0.0)]), 0.0), answer_all)
    assert places(log) == [("short", 4)]


def test_a_long_job_backfills_only_into_the_extra_nodes() -> None:
    hog = job("hog", 6, 100)
    jobs = [job("head", 8, 50), job("long", 4, 500), job("small", 2, 500), job("more", 1, 500)]
    log = drive(EasyPolicy().decide(view(jobs, 10, [(hog, 6, 0.0)]), 0.0), answer_all)
    # extra = 10 - 8 = 2 nodes at the shadow time: 'small' takes them, 'more' finds none
    assert places(log) == [("small", 2)]


def test_a_moldable_backfill_is_cut_to_the_extra_nodes() -> None:
    hog = job("hog", 6, 100)
    jobs = [job("head", 8, 50), job("mold", 4, 500, kind=JobKind.MOLDABLE, low=1)]
    log = drive(EasyPolicy().decide(view(jobs, 10, [(hog, 6, 0.0)]), 0.0), answer_all)
    assert places(log) == [("mold", 2)]


def test_without_wall_times_only_the_extra_nodes_are_backfilled() -> None:
    hog = job("hog", 6, 100, walltime=None)
    jobs = [job("head", 8, 50, walltime=None), job("short", 4, 1, walltime=None),
            job("two", 2, 1, walltime=None)]
    log = drive(EasyPolicy().decide(view(jobs, 10, [(hog, 6, 0.0)]), 0.0), answer_all)
    # the hog never ends as far as EASY knows: shadow at infinity, extra = 10 - 8
    assert places(log) == [("two", 2)]


def test_a_job_bigger_than_the_cluster_is_rejected() -> None:
    log = drive(EasyPolicy().decide(view([job("big", 20, 5)], 10, []), 0.0), answer_all)
    assert [type(a) for a, _ in log] == [Reject]


def test_reservation_counts_jobs_ending_and_nodes_being_released() -> None:
    a, b = job("a", 4, 30), job("b", 4, 60)
    v = View(10.0, {"c": cluster("c", 10, [running(a, 4, 0.0), running(b, 4, 0.0,
                                                                       releasing=2)])}, [])
    plan = Plan.of(v, 10.0)  # 2 free now, 2 being released, 4 at t=30, 2 more at t=60
    shadows = {need: plan.reserve(job("h", need, 1)) for need in (2, 4, 6, 8, 9, 10)}
    assert {need: (r.shadow, r.extra) for need, r in shadows.items() if r is not None} == {
        2: (10.0, 0), 4: (10.0, 0), 6: (30.0, 2), 8: (30.0, 0), 9: (60.0, 1), 10: (60.0, 0)}


def test_registry_and_factory() -> None:
    assert easy().name == "easy"
    assert make("easy").name == "easy"


# ------------------------------------------------------------------ EASY never delays the head


@dataclass
class HeadWatch:
    """Wraps a policy; after each decision notes the head's reservation (shadow time)."""

    inner: Policy
    shadows: dict[str, float] = field(default_factory=dict)

    @property
    def name(self) -> str:
        return "watch"

    def decide(self, view: View, now: float) -> Generator[Action, int | None, None]:
        plan = Plan.of(view, now)
        started: set[str] = set()
        decision = self.inner.decide(view, now)
        assert isinstance(decision, Generator)
        answer: int | None = None
        while True:
            try:
                action = decision.send(answer)
            except StopIteration:
                break
            answer = yield action
            if isinstance(action, Place) and answer:
                spec = next(w.spec for w in view.waiting if w.id == action.job_id)
                plan.started(action.cluster, spec, int(answer))
                started.add(action.job_id)
        head = next((w.spec for w in view.waiting if w.id not in started), None)
        if head is not None:
            reservation = plan.reserve(head)
            if reservation is not None:
                self.shadows[head.id] = min(self.shadows.get(head.id, math.inf),
                                            reservation.shadow)


def random_jobs(seed: int, count: int = 40) -> list[JobSpec]:
    rng = random.Random(seed)
    specs, now = [], 0.0
    for i in range(count):
        now += rng.expovariate(1 / 5.0)
        size = rng.choice((1, 2, 3, 4, 6, 8, 12, 16))
        runtime = float(rng.randint(5, 120))
        kind = rng.choice((JobKind.RIGID, JobKind.MOLDABLE))
        low = size if kind is JobKind.RIGID else max(1, size // 4)
        specs.append(job(f"j{i}", size, runtime, now, kind=kind, low=low))
    return specs


@pytest.mark.parametrize("seed", range(12))
def test_easy_never_delays_the_queue_head(seed: int) -> None:
    """With exact wall times, every head starts no later than any reservation it was given."""
    watch = HeadWatch(EasyPolicy())
    result = simulate(random_jobs(seed), (Cluster("c", 16),), watch)
    starts = {r.spec.id: r.start for r in result.records}
    assert watch.shadows, "no job was ever blocked: the scenario tests nothing"
    late = {j: (starts[j], s) for j, s in watch.shadows.items()
            if starts[j] is None or starts[j] > s + 1e-6}
    assert not late


@dataclass
class GreedyFirstFit:
    """Backfills anything that fits (no reservation): the check above must catch it."""

    @property
    def name(self) -> str:
        return "greedy"

    def decide(self, view: View, now: float) -> Generator[Action, int | None, None]:
        free = {n: c.available for n, c in view.clusters.items()}
        for w in view.waiting:
            size = start_size(w.spec, free["c"])
            if size and (yield Place(w.id, "c", size)):
                free["c"] -= size


def test_the_head_check_catches_a_policy_that_delays_the_head() -> None:
    hog, head, sneak = job("hog", 6, 10), job("head", 8, 10, 1.0), job("sneak", 4, 100, 2.0)
    watch = HeadWatch(GreedyFirstFit())
    result = simulate([hog, head, sneak], (Cluster("c", 10),), watch)
    starts = {r.spec.id: r.start for r in result.records}
    assert watch.shadows["head"] == 10.0 and starts["head"] == 102.0


def test_the_random_scenarios_do_backfill() -> None:
    """The head test above is meaningful only if jobs overtake blocked ones."""
    overtakes = 0
    for seed in range(12):
        result = simulate(random_jobs(seed), (Cluster("c", 16),), EasyPolicy())
        records = sorted(result.records, key=lambda r: r.spec.submit_time)
        for i, r in enumerate(records):
            overtakes += any(o.start is not None and r.start is not None and o.start > r.start
                             for o in records[:i])
    assert overtakes > 0
