"""EASY's index of expected ends gives the plan a fresh rebuild gives, whatever happens."""

from __future__ import annotations

import random

from malleable.model import JobKind, JobSpec, View
from malleable.policies.easy import ExpectedEnds, Plan
from tests.fakes.builders import cluster, running


def spec(n: int, walltime: float | None) -> JobSpec:
    return JobSpec(f"j{n}", JobKind.MALLEABLE, 1, 16, 1, walltime=walltime)


def test_the_index_follows_starts_resizes_releases_and_ends() -> None:
    rng = random.Random(5)
    index = ExpectedEnds()
    live = {}
    now, made = 0.0, 0
    for step in range(600):
        now += rng.choice((0.0, 1.0, 5.0))
        move = rng.random()
        if move < 0.4 or not live:
            made += 1
            walltime = rng.choice((None, 3.0, 10.0, 10.0, 40.0))
            job = running(spec(made, walltime), rng.randint(1, 4), now)
            live[job.id] = job
        elif move < 0.7:
            old = live[rng.choice(sorted(live))]
            size = rng.randint(1, 6)
            live[old.id] = running(old.spec, size, old.start_time,
                                   releasing=rng.randint(0, size))
        else:
            del live[rng.choice(sorted(live))]
        view = View(now, {"c": cluster("c", 64, list(live.values()), idle=rng.randint(0, 8))})
        if rng.random() < 0.2:
            view = View(now, {"c": view.clusters["c"]})  # the same running jobs again
        fresh, kept = Plan.of(view, now), Plan.of(view, now, index)
        assert kept.ends == fresh.ends and kept.releasing == fresh.releasing, step
        for need in (1, 4, 9, 20, 70):
            demand = JobSpec("h", JobKind.RIGID, need, need, need, walltime=1.0)
            a, b = fresh.reserve(demand), kept.reserve(demand)
            assert (a is None and b is None) or (a and b and (a.shadow, a.extra) == (
                b.shadow, b.extra)), (step, need)
        kept.started("c", spec(10_000 + step, 2.0), 1)  # the plan copies, the index keeps
        assert Plan.of(view, now, index).ends == fresh.ends


def test_starts_noted_before_the_ends_are_read_are_in_them() -> None:
    """A plan reads the expected ends only when asked; starts made before count too."""
    jobs = [running(spec(1, 10.0), 2, 0.0), running(spec(2, None), 1, 0.0, releasing=1),
            running(spec(3, 4.0), 3, 1.0)]
    view = View(2.0, {"c": cluster("c", 16, jobs), "d": cluster("d", 8, jobs[:1])})
    eager = Plan.of(view, 2.0)
    assert eager.ends  # read first
    lazy = Plan.of(view, 2.0, ExpectedEnds())
    for plan in (eager, lazy):
        plan.started("c", spec(4, 1.0), 2)
        plan.started("d", spec(5, None), 1)
        plan.started("c", spec(6, 20.0), 1)
    assert lazy.ends == eager.ends and lazy.releasing == eager.releasing == {"c": 1, "d": 0}
    assert lazy.ends["c"] == [(3.0, 2), (5.0, 3), (10.0, 2), (22.0, 1)]
    assert lazy.free == eager.free == {"c": 16 - 6 - 3, "d": 8 - 2 - 1}
