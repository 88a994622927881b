"""EASY's index over the queue (blocks with their smallest start size and wall time, kept
from the manager's queue change log) lists the queue as it is, and the pass that passes
over whole blocks decides as the plain pass that tries every job."""

from __future__ import annotations

import random

import pytest

from malleable.manager import Manager
from malleable.model import Action, JobKind, JobSpec, Place, View, WaitingJob
from malleable.policies.easy import (
    LONG_QUEUE,
    QUEUE_BLOCK,
    EasyPolicy,
    Plan,
    QueueIndex,
    easy_schedule,
)
from malleable.sim.cluster import SimCluster
from malleable.sim.engine import Engine
from tests.fakes.builders import cluster, drive, rigid, running
from tests.unit.test_easy_shortcuts import answers, outcome, plain_pass, random_spec, random_state


def runs(rng: random.Random, first: int, largest: int) -> list[WaitingJob]:
    """A long queue in runs (as a real log's): runs of big jobs, of long jobs without a
    wall time, of short small ones, and mixed ones, so that whole blocks can be passed."""
    jobs: list[WaitingJob] = []
    n = first
    while len(jobs) < rng.randint(LONG_QUEUE, 3 * LONG_QUEUE):
        kind = rng.random()
        for _ in range(rng.choice((5, 40, 64, 90, 150))):
            n += 1
            if kind < 0.3:
                size = rng.randint(max(1, largest - 3), largest)
                spec = JobSpec(f"q{n}", JobKind.RIGID, size, size, size,
                               walltime=rng.choice((None, 50.0, 200.0)))
            elif kind < 0.55:
                size = rng.randint(2, max(2, largest // 2))
                spec = JobSpec(f"q{n}", JobKind.RIGID, size, size, size,
                               walltime=rng.choice((None, 500.0)))
            else:
                spec = random_spec(rng, n, largest)
            jobs.append(WaitingJob(spec))
    return jobs


def indexed(index: QueueIndex):  # type: ignore[no-untyped-def]
    def schedule(queue, plan):  # type: ignore[no-untyped-def]
        left = yield from easy_schedule(queue, plan, keep=False, index=index)
        return left
    return schedule


def listed(index: QueueIndex) -> list[WaitingJob]:
    return [job for job in index.jobs if job is not None]


@pytest.mark.parametrize("seed", range(12))
def test_the_indexed_pass_decides_as_the_plain_pass_while_the_queue_changes(seed: int) -> None:
    """A long-lived index followed through a log of arrivals, departures anywhere and
    jobs coming back (to the end), and sometimes a new log (read again): after every
    change it lists the queue in order, and the pass through it yields the plain pass's
    actions (with the same answers) on random cluster states."""
    rng = random.Random(500 + seed)
    index = QueueIndex()
    view, now, refused = random_state(rng)
    largest = max(c.nodes for c in view.clusters.values())
    queue = {w.id: w for w in runs(rng, 0, largest)}
    log = list(queue)
    made = 10_000
    passed = 0
    for step in range(25):
        view, now, refused = random_state(rng)
        largest = max(c.nodes for c in view.clusters.values())
        waiting = list(queue.values())
        index.sync(waiting, (log, len(log), queue))
        assert listed(index) == waiting, (seed, step)
        state = View(now, view.clusters, waiting)
        got = outcome(indexed(index), state, now, refused)[0]
        assert got == outcome(plain_pass, state, now, refused)[0], (seed, step)
        passed += sum(1 for a, _ in got if isinstance(a, Place))
        gone = rng.sample(sorted(queue), rng.randint(0, len(queue) // 3))
        for job_id in gone:
            del queue[job_id]
            log.append(job_id)
        for job_id in rng.sample(gone, min(len(gone), rng.randint(0, 5))):
            queue[job_id] = WaitingJob(JobSpec(job_id, JobKind.RIGID, 1, 1, 1))
            log.append(job_id)  # back, at the end
        for job in runs(rng, made, largest)[: rng.randint(0, 80)]:
            queue[job.id] = job
            log.append(job.id)
        made += 1000
        if rng.random() < 0.1:
            log = []  # a new log: the index reads the queue again
    assert passed > 0


def test_the_pass_walks_only_the_blocks_where_a_job_can_start() -> None:
    """8 nodes, 4 free until a job ends at 100; the head needs 8 (shadow time 100, no
    extra node). A block of the head and jobs of 6 nodes (too big for the 4 free), two of
    jobs of 2 nodes running 1,000 s (past the shadow time, no extra node), and one of jobs
    of 6 nodes ending with a job of 1 node for 50 s, which is backfilled. The pass goes by
    the blocks' bounds: with a block's bounds made to say that nothing in it can start (a
    smallest wall time or start size larger than its jobs'), a job that could start there
    is passed over, which shows that the pass skips blocks by each of its two tests (a
    walk job by job would start it)."""
    block = QUEUE_BLOCK
    specs = [rigid("head", 8)]
    specs += [rigid(f"six{n}", 6) for n in range(block - 1)]
    specs += [JobSpec(f"two{n}", JobKind.RIGID, 2, 2, 2, walltime=1000.0)
              for n in range(2 * block)]
    specs += [JobSpec(f"late{n}", JobKind.RIGID, 6, 6, 6) for n in range(block - 1)]
    specs.append(JobSpec("short", JobKind.RIGID, 1, 1, 1, walltime=50.0))
    busy = JobSpec("busy", JobKind.RIGID, 4, 4, 4, walltime=100.0)

    def decide(specs: list[JobSpec], low: dict[int, int],
               wall: dict[int, float]) -> list[tuple[Action, object]]:
        queue = [WaitingJob(spec) for spec in specs]
        state = View(0.0, {"c": cluster("c", 8, [running(busy, 4, 0.0)])}, queue)
        index = QueueIndex()
        index.sync(queue, ([], 0, {w.id: w for w in queue}))
        for k in low:
            index.bounds(k)
            index._low[k] = low[k]
        for k in wall:
            index.bounds(k)
            index._wall[k] = wall[k]
        got = drive(easy_schedule(queue, Plan.of(state, 0.0), keep=False, index=index),
                    answers(set()))
        if not low and not wall:
            assert got == outcome(plain_pass, state, 0.0, set())[0]
        return got

    assert decide(specs, {}, {}) == [(Place("short", "c", 1), 1)]
    assert decide(specs, {3: 5}, {}) == []  # "6 nodes at least": passed over (4 free)
    sneaky = list(specs)
    sneaky[block + 5] = JobSpec("sneak", JobKind.RIGID, 2, 2, 2, walltime=50.0)
    assert decide(sneaky, {}, {})[0] == (Place("sneak", "c", 2), 2)
    assert decide(sneaky, {}, {1: 1000.0}) == [(Place("short", "c", 1), 1)]


def test_the_manager_logs_every_way_into_and_out_of_its_queue() -> None:
    """Submit, withdraw, take_placed, a job given back (to the end), restore: an index fed
    the manager's view of each cycle lists the manager's queue in order."""
    engine = Engine()
    site = SimCluster("c", 4, engine)
    seen: list[View] = []

    class Watch(EasyPolicy):
        def decide(self, view, now):  # type: ignore[no-untyped-def]
            seen.append(view)
            return super().decide(view, now)

    manager = Manager(Watch(), {"c": site})
    index = QueueIndex()

    def check() -> None:
        manager.cycle(engine.now)
        view = seen[-1]
        assert view.queue_log is not None
        index.sync(view.waiting, view.queue_log)
        assert [w.id for w in listed(index)] == manager.waiting_ids()

    for n in range(LONG_QUEUE + 20):
        manager.submit(rigid(f"j{n}", 4, 10.0))  # j0 starts, the others wait
    check()
    assert manager.withdraw("j5", 0.0, "user")
    assert manager.take_placed("j7", "c", 1, 0.0)
    manager.submit(rigid("late", 4, 10.0))
    check()
    manager.restore([], {})
    check()
    assert manager.waiting_ids()[:3] == ["j1", "j2", "j3"]
    assert manager.waiting_ids()[-1] == "late"
