"""EASY as the textbook has it, checked against a small independent simulator.

The reference below knows nothing of the manager, views or actions: rigid jobs, one
cluster, times as numbers. At each event time, jobs ending then free their nodes,
jobs submitted then join the queue, then one scheduling pass (Mu'alem & Feitelson's
EASY): start jobs from the head while they fit; the first that does not fit gets a
reservation at the earliest time enough nodes are free if running jobs end at their
estimates (start + wall time), and the extra nodes are those free at that time beyond
its need (every job expected to end by then counted); each later job, in order,
starts now if it fits now and either ends (by its estimate) by the shadow time or
takes no more than the extra nodes (which it then uses up).
"""

from __future__ import annotations

import heapq
import random
from dataclasses import dataclass

import pytest

from malleable.model import Cluster, JobKind, JobSpec
from malleable.policies.easy import EasyPolicy
from malleable.sim.run import SimConfig, simulate


@dataclass(frozen=True)
class Rigid:
    id: str
    submit: float
    size: int
    runtime: float
    walltime: float


def reference_easy(jobs: list[Rigid], nodes: int) -> dict[str, float]:
    """Start time of each job under textbook EASY on one cluster of ``nodes``."""
    arrivals = sorted(jobs, key=lambda j: (j.submit, int(j.id)))
    starts: dict[str, float] = {}
    running: list[tuple[float, float, int]] = []  # (actual end, expected end, size)
    ends: list[float] = []  # heap of actual end times
    queue: list[Rigid] = []
    free, i = nodes, 0
    while i < len(arrivals) or queue or running:
        now = min(([arrivals[i].submit] if i < len(arrivals) else []) + ends[:1])
        for _end, _, size in [r for r in running if r[0] == now]:
            free += size
        running = [r for r in running if r[0] != now]
        while ends and ends[0] == now:
            heapq.heappop(ends)
        while i < len(arrivals) and arrivals[i].submit == now:
            queue.append(arrivals[i])
            i += 1
        free = _easy_pass(now, queue, running, ends, starts, free, nodes)
    return starts


def _easy_pass(now: float, queue: list[Rigid], running: list[tuple[float, float, int]],
               ends: list[float], starts: dict[str, float], free: int, nodes: int) -> int:
    def start(job: Rigid) -> None:
        starts[job.id] = now
        running.append((now + job.runtime, now + job.walltime, job.size))
        heapq.heappush(ends, now + job.runtime)

    while queue and queue[0].size <= free:
        job = queue.pop(0)
        start(job)
        free -= job.size
    if not queue:
        return free
    head = queue[0]
    expected = sorted(max(now, e) for _, e, _ in running)
    shadow, then = now, free
    for moment in expected:
        if then >= head.size:
            break
        shadow = moment
        then = free + sum(s for _, e, s in running if max(now, e) <= moment)
    extra = then - head.size
    for job in list(queue[1:]):
        if job.size > free:
            continue
        ends_by_shadow = now + job.walltime <= shadow
        if ends_by_shadow or job.size <= extra:
            queue.remove(job)
            start(job)
            free -= job.size
            if not ends_by_shadow:
                extra -= job.size
    return free


def ours(jobs: list[Rigid], nodes: int) -> dict[str, float]:
    specs = [JobSpec(j.id, JobKind.RIGID, j.size, j.size, j.size, submit_time=j.submit,
                     app="fixed", runtime=j.runtime, walltime=j.walltime) for j in jobs]
    result = simulate(specs, (Cluster("c", nodes),), EasyPolicy(), SimConfig(timeline=False))
    return {r.spec.id: r.start for r in result.records if r.start is not None}


def random_trace(seed: int, count: int, nodes: int, integer: bool) -> list[Rigid]:
    rng = random.Random(seed)
    jobs, now = [], 0.0
    for n in range(1, count + 1):
        now += rng.expovariate(1 / 6.0)
        submit = float(int(now)) if integer else now
        runtime = float(rng.randint(1, 60)) if integer else rng.uniform(1, 60)
        walltime = runtime * rng.choice((1.0, 1.5, 2.0, 3.0))
        jobs.append(Rigid(str(n), submit, rng.choice((1, 2, 3, 4, 6, 8, 12, nodes)),
                          runtime, float(int(walltime + 0.999)) if integer else walltime))
    return jobs


def test_the_reference_on_a_case_worked_by_hand() -> None:
    # 10 nodes. t=0: 1 (6 nodes, 100 s) starts; 2 (8) waits: shadow 100, extra 2;
    # 3 (4 nodes, expected end 91 <= 100) backfills into the 4 free nodes; none left.
    # t=90, 3 ends: 4 free, shadow still 100, extra 2: 4 (2 nodes, long) takes the
    # extra nodes; 5 (1 node, ends at 100 <= shadow) backfills too. t=100: 2 starts.
    jobs = [Rigid("1", 0, 6, 100, 100), Rigid("2", 0, 8, 50, 50), Rigid("3", 0, 4, 90, 91),
            Rigid("4", 0, 2, 500, 500), Rigid("5", 0, 1, 10, 10)]
    expect = {"1": 0.0, "2": 100.0, "3": 0.0, "4": 90.0, "5": 90.0}
    assert reference_easy(jobs, 10) == expect
    assert ours(jobs, 10) == expect


@pytest.mark.parametrize("seed", range(8))
def test_ours_is_the_reference_on_random_traces(seed: int) -> None:
    jobs = random_trace(seed, 300, 16, integer=False)
    assert ours(jobs, 16) == reference_easy(jobs, 16)


@pytest.mark.parametrize("seed", range(8))
def test_ours_is_the_reference_with_ties_in_expected_ends(seed: int) -> None:
    """Integer times: several jobs expected to end at the shadow time at once."""
    jobs = random_trace(100 + seed, 300, 16, integer=True)
    assert ours(jobs, 16) == reference_easy(jobs, 16)
