"""EASY's placement pass skips most jobs without trying them (too big for the free nodes,
no room unless they end by the shadow time, a shape that failed already, nothing free):
on random states it yields the same actions and leaves the same jobs waiting as a plain
pass that tries every job on every cluster."""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence

import pytest

from malleable.model import (
    Action,
    JobKind,
    JobSpec,
    Place,
    SizeRule,
    View,
    WaitingJob,
)
from malleable.policies.base import Negotiating, infeasible
from malleable.policies.easy import (
    EasyPolicy,
    Plan,
    Reservation,
    _try_start,
    easy_schedule,
    submission_range,
)
from tests.fakes.builders import cluster, drive, running


def plain_pass(queue: Sequence[WaitingJob], plan: Plan) -> Negotiating[list[WaitingJob]]:
    """EASY without shortcuts: every job is rejected, started or left waiting on its own,
    with the two rules the pass documents: once nothing is free and the head holds its
    reservation, the rest waits as it is (rejected in a later cycle); a shape refused
    (a place answered 0) is not tried again in the same pass. It reads the expected
    ends first (the pass reads them only if it makes a reservation)."""
    assert plan.ends is not None
    largest = max(plan.capacity.values(), default=0)
    left: list[WaitingJob] = []
    reservation: Reservation | None = None
    refused: set[tuple[int, int, SizeRule, float | None]] = set()
    for i, waiting in enumerate(queue):
        if reservation is not None and max(plan.free.values()) <= 0:
            return left + list(queue[i:])
        spec = waiting.spec
        low = submission_range(spec)[0]
        shape = (low, spec.max_size, spec.size_rule, spec.walltime)
        reject = infeasible(waiting.id, low, largest)
        if reject is not None:
            yield reject
            continue
        if shape not in refused:
            tries = Tries(plan)
            if (yield from tries.start(spec, reservation)):
                continue
            if tries.refused:
                refused.add(shape)
        left.append(waiting)
        if reservation is None:
            reservation = plan.reserve(spec)
    return left


class Tries:
    """:func:`_try_start`, noting whether a place was refused."""

    def __init__(self, plan: Plan) -> None:
        self.plan, self.refused = plan, False

    def start(self, spec: JobSpec, reservation: Reservation | None) -> Negotiating[bool]:
        steps = _try_start(spec, self.plan, reservation)
        answer: int | None = None
        while True:
            try:
                action = steps.send(answer)
            except StopIteration as done:
                return bool(done.value)
            answer = yield action
            self.refused |= isinstance(action, Place) and not answer


def random_spec(rng: random.Random, n: int, largest: int) -> JobSpec:
    kind = rng.choice(list(JobKind))
    high = rng.choice((1, 2, 3, 4, 5, 8, 12, 16, largest, largest + 3))
    low = high if kind is JobKind.RIGID else rng.randint(1, high)
    walltime = rng.choice((None, 1.0, 5.0, 10.0, 20.0, 40.0, 200.0))
    rule = rng.choice((SizeRule.ANY, SizeRule.POW2)) if kind is not JobKind.RIGID else (
        SizeRule.ANY)
    return JobSpec(f"q{n}", kind, low, high, low, size_rule=rule, walltime=walltime)


def random_state(rng: random.Random) -> tuple[View, float, set[str]]:
    """A view of 1 to 3 clusters with running jobs, a queue, and the places to refuse."""
    now = rng.choice((0.0, 7.0, 30.0))
    full = rng.random() < 0.3  # no free node anywhere
    clusters = {}
    made = 0
    for c in range(rng.randint(1, 3)):
        name = f"c{c}"
        nodes = rng.choice((4, 8, 16))
        jobs, used = [], 0
        while used < nodes and rng.random() < 0.8:
            made += 1
            size = rng.randint(1, max(1, (nodes - used) // 2))
            spec = JobSpec(f"r{made}", JobKind.MALLEABLE, 1, 16, 1,
                           walltime=rng.choice((None, 3.0, 10.0, 25.0, 60.0)))
            jobs.append(running(spec, size, rng.choice((0.0, now - 2.0, now)), name,
                                releasing=rng.choice((0, 0, 0, 1)) if size > 1 else 0))
            used += size
        clusters[name] = cluster(name, nodes, jobs, reserve=rng.choice((0, 0, 1)),
                                 idle=0 if full else rng.randint(0, nodes - used))
    largest = max(c.nodes for c in clusters.values())
    queue = [WaitingJob(random_spec(rng, n, largest)) for n in range(rng.randint(0, 25))]
    refused = {w.id for w in queue if rng.random() < 0.1}
    return View(now, clusters, queue), now, refused


def answers(refused: set[str]) -> Callable[[Action], int | None]:
    def answer(action: Action) -> int | None:
        if isinstance(action, Place):
            return 0 if action.job_id in refused else action.size
        return None
    return answer


def outcome(schedule: Callable[[Sequence[WaitingJob], Plan], Negotiating[list[WaitingJob]]],
            view: View, now: float, refused: set[str]
            ) -> tuple[list[tuple[Action, object]], list[WaitingJob]]:
    """The actions with their answers, and the jobs left waiting."""
    left: list[WaitingJob] = []

    def run() -> Negotiating[None]:
        left.extend((yield from schedule(list(view.waiting), Plan.of(view, now))))

    return drive(run(), answers(refused)), left


@pytest.mark.parametrize("seed", range(40))
def test_the_pass_acts_as_a_pass_without_shortcuts(seed: int) -> None:
    rng = random.Random(seed)
    for case in range(50):
        view, now, refused = random_state(rng)
        assert outcome(easy_schedule, view, now, refused) == outcome(
            plain_pass, view, now, refused), (seed, case)


def test_the_random_states_reach_every_case() -> None:
    """The states above do backfill both ways, reject, refuse, and leave jobs waiting."""
    rng = random.Random(0)
    seen: set[str] = set()
    for _ in range(500):
        view, now, refused = random_state(rng)
        plan = Plan.of(view, now)
        log = drive(easy_schedule(list(view.waiting), plan), answers(refused))
        seen.update(type(a).__name__ for a, _ in log)
        seen.update("refused" for a, r in log if isinstance(a, Place) and r == 0)
        seen.update("pow2" for a, _ in log if isinstance(a, Place) and a.size == 4)
    assert {"Place", "Reject", "refused"} <= seen


def decided(policy: EasyPolicy, view: View, now: float,
            refused: set[str]) -> list[tuple[Action, object]]:
    return drive(policy.decide(view, now), answers(refused))


@pytest.mark.parametrize("seed", range(20))
def test_the_policy_acts_as_the_plain_pass(seed: int) -> None:
    """Also with an empty queue, or no free node anywhere (decided without a plan)."""
    rng = random.Random(1000 + seed)
    for case in range(50):
        view, now, refused = random_state(rng)
        assert decided(EasyPolicy(), view, now, refused) == outcome(
            plain_pass, view, now, refused)[0], (seed, case)


def evolve(rng: random.Random, view: View, now: float, made: int) -> tuple[View, int]:
    """The next view: jobs end, start, resize or start releasing nodes; the free nodes,
    the queue and the time change; or the same cluster views come back."""
    if rng.random() < 0.15:
        return View(now, view.clusters, view.waiting), made
    clusters = {}
    for name, old in view.clusters.items():
        jobs = dict(old.running)
        for _ in range(rng.randint(0, 3)):
            move = rng.random()
            if move < 0.35 and jobs:
                del jobs[rng.choice(sorted(jobs))]
            elif move < 0.7:
                made += 1
                spec = JobSpec(f"n{made}", JobKind.MALLEABLE, 1, 16, 1,
                               walltime=rng.choice((None, 2.0, 9.0, 30.0)))
                jobs[spec.id] = running(spec, rng.randint(1, 3), now, name)
            elif jobs:
                job = jobs[rng.choice(sorted(jobs))]
                size = rng.randint(1, 4)
                jobs[job.id] = running(job.spec, size, job.start_time, name,
                                       releasing=rng.randint(0, size - 1))
        used = sum(j.size for j in jobs.values())
        idle = 0 if rng.random() < 0.3 else rng.randint(0, max(0, old.nodes - used))
        clusters[name] = cluster(name, old.nodes, jobs.values(), old.reserve, idle)
    queue = list(view.waiting)[rng.randint(0, 3):]
    if rng.random() < 0.2:
        queue = []
    largest = max(c.nodes for c in clusters.values())
    queue += [WaitingJob(random_spec(rng, made + n, largest)) for n in range(rng.randint(0, 3))]
    return View(now, clusters, queue), made + 3


@pytest.mark.parametrize("seed", range(10))
def test_a_long_lived_policy_decides_as_a_fresh_one(seed: int) -> None:
    """EASY keeps an index of expected ends across cycles, and leaves it behind in the
    cycles it decides without a plan; whatever the views, it decides as a new policy."""
    rng = random.Random(2000 + seed)
    policy = EasyPolicy()
    view, now, refused = random_state(rng)
    made = 0
    for step in range(150):
        assert decided(policy, view, now, refused) == decided(
            EasyPolicy(), view, now, refused), (seed, step)
        if rng.random() < 0.05:
            view, now, refused = random_state(rng)  # a view from elsewhere
        else:
            now += rng.choice((0.0, 1.0, 4.0))
            view, made = evolve(rng, view, now, made)
