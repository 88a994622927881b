"""EASY's index of expected ends gives the plan a fresh rebuild gives, whatever happens."""

from __future__ import annotations

import dataclasses
import random

from malleable.model import ClusterView, JobKind, JobSpec, View
from malleable.policies.easy import ExpectedEnds, Plan
from malleable.sim.cluster import SimCluster
from malleable.sim.engine import Engine
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


def simulated_views(seed: int, steps: int) -> list[ClusterView]:
    """The views of a simulated cluster through random starts, ends, shrinks (nodes
    released later) and grows, one per step (a view often continues the last's log)."""
    rng = random.Random(seed)
    engine = Engine()
    sim = SimCluster("c", 64, engine, release_delay=2.0)
    views, made = [], 0
    for _ in range(steps):
        move = rng.random()
        running = sorted(sim.observe().running)
        if move < 0.5 and sim.idle:
            made += 1
            walltime = rng.choice((None, 3.0, 10.0, 40.0))
            job = JobSpec(f"j{made}", JobKind.MALLEABLE, 1, 16, 1, runtime=rng.choice(
                (1.0, 4.0, 30.0)), walltime=walltime)
            sim.start(job, rng.randint(1, min(6, sim.idle)))
        elif move < 0.6 and running:
            sim.request_shrink(rng.choice(running), rng.randint(1, 3), mandatory=False)
        elif move < 0.7 and running and sim.idle:
            sim.offer_grow(rng.choice(running), rng.randint(1, sim.idle))
        else:
            engine.run(until=engine.now + rng.choice((0.5, 1.0, 3.0)))
        views.append(sim.observe())
    return views


def test_the_index_follows_a_simulated_clusters_change_log() -> None:
    """Read at every view or now and then (the log then spans several views), the index
    that follows the log gives what a full comparison gives; past the log's limit the
    cluster starts a new log, and the index compares everything once."""
    for seed in range(4):
        views = simulated_views(seed, 6000)
        logs = {id(v.changes[0]) for v in views if v.changes is not None}
        assert len(logs) >= 2, "the run must pass the log's limit"
        for every in (1, 3):
            index = ExpectedEnds()
            for step, view in enumerate(views[::every]):
                assert index.of(view) == ExpectedEnds().of(view), (seed, every, step)


def test_the_index_reads_only_the_logged_ids_of_a_continued_log() -> None:
    """White box: a log that leaves out a change is believed (so the short path is the
    one taken); an older view of the same log, or a new log, is compared in full."""
    log = ["j1"]
    a, b = running(spec(1, 10.0), 2, 0.0), running(spec(2, 5.0), 3, 0.0)
    first = cluster("c", 16, [a])
    first = dataclasses.replace(first, changes=(log, 1))
    index = ExpectedEnds()
    assert index.of(first) == ([(10.0, 2)], 0)
    unlogged = dataclasses.replace(first, running={"j1": a, "j2": b}, changes=(log, 1))
    assert index.of(unlogged) == ([(10.0, 2)], 0)  # b is not in the log: not seen
    log.append("j2")
    logged = dataclasses.replace(unlogged, running=dict(unlogged.running), changes=(log, 2))
    assert index.of(logged) == ([(5.0, 3), (10.0, 2)], 0)
    older = dataclasses.replace(first, running={"j1": a}, changes=(log, 1))
    assert index.of(older) == ([(10.0, 2)], 0)
    fresh_log = dataclasses.replace(logged, running=dict(logged.running), changes=(["x"], 1))
    assert index.of(fresh_log) == ([(5.0, 3), (10.0, 2)], 0)
