"""Background load: local users who submit straight to a cluster, bypassing the manager.

Their jobs arrive as a Poisson process per cluster, ask for a uniform number of
nodes in ``[min_size, max_size]`` and run for an exponential time; each cluster
starts them first-come-first-served as its nodes allow. To the manager they are
just nodes that are busy (``managed=False`` in the view), as on a real cluster.
"""

from __future__ import annotations

import math
import random
from collections import deque
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from malleable.compiling import mypyc_attr
from malleable.model import JobKind, JobSpec
from malleable.sim.cluster import SimCluster
from malleable.sim.engine import ARRIVAL


@mypyc_attr(native_class=False)  # picklable when compiled (setup.py)
@dataclass(frozen=True)
class BackgroundSpec:
    """Local users' load on every cluster (``interarrival`` and ``runtime`` are means, s)."""

    interarrival: float = 600.0
    runtime: float = 900.0
    min_size: int = 1
    max_size: int = 4

    def __post_init__(self) -> None:
        if self.interarrival <= 0 or self.runtime <= 0:
            raise ValueError("background interarrival and runtime must be positive")
        if not 1 <= self.min_size <= self.max_size:
            raise ValueError("background sizes need 1 <= min_size <= max_size")


@dataclass
class BackgroundLoad:
    """Drives local jobs on a set of simulated clusters until ``stop`` is set."""

    spec: BackgroundSpec
    clusters: list[SimCluster]
    seed: int = 0
    stop: bool = False
    _rng: random.Random = field(init=False)
    _queues: dict[str, deque[JobSpec]] = field(init=False, default_factory=dict)
    _count: int = field(init=False)

    def __post_init__(self) -> None:
        self._rng = random.Random(self.seed)
        self._count = 0
        for cluster in self.clusters:
            self._queues[cluster.name] = deque()
            self._next_arrival(cluster)

    def _next_arrival(self, cluster: SimCluster) -> None:
        delay = self._rng.expovariate(1.0 / self.spec.interarrival)
        cluster.engine.at(cluster.engine.now + delay, lambda: self._arrive(cluster), ARRIVAL)

    def _arrive(self, cluster: SimCluster) -> None:
        if self.stop:
            return
        self._count += 1
        size = self._rng.randint(self.spec.min_size, min(self.spec.max_size, cluster.nodes))
        runtime = self._rng.expovariate(1.0 / self.spec.runtime)
        spec = JobSpec(f"bg-{cluster.name}-{self._count}", JobKind.RIGID, size, size, size,
                       submit_time=cluster.engine.now, runtime=runtime)
        self._queues[cluster.name].append(spec)
        self._next_arrival(cluster)

    def start_waiting(self) -> None:
        """Start the local jobs that fit, in order, on every cluster."""
        for cluster in self.clusters:
            queue = self._queues[cluster.name]
            while queue and queue[0].min_size <= cluster.idle:
                spec = queue.popleft()
                cluster.start(spec, spec.min_size, managed=False)


#: Seconds in a week: site ``i`` of a platform replays its window ``i`` weeks later.
WEEK = 7 * 86400.0


@mypyc_attr(native_class=False)  # picklable when compiled (setup.py)
@dataclass(frozen=True)
class TraceBackground:
    """Local users' load replayed from a real log (:mod:`malleable.workloads.reallog`).

    The rule (docs/simulate.md, "Background load from a real log"):

    * window: the platform's first cluster replays the log from ``start`` (seconds from
      the log's first submit), cluster ``i`` (in platform order) from ``start + i`` weeks
      (the same weekday and hour, other weeks: the sites' users are not in lockstep);
      past the log's end a window wraps to its beginning;
    * state at the window's start: the jobs the log shows running then start at time 0
      for the rest of their run time (in submit order, as long as they fit: sizes are
      rounded), those it shows waiting are queued at time 0 after them (in submit order);
      later jobs arrive at their submit time minus the window's start;
    * size: a job's nodes scaled by the cluster's nodes over the log machine's,
      ``max(1, round(nodes * cluster / log))``, at most the cluster (the log's share of
      its machine is kept); its run time is the log's (a cluster's ``speed`` divides it);
    * each cluster starts its local jobs first-come-first-served as nodes are idle,
      before the manager's cycle (the manager sees them, ``managed=False``, and controls
      none of them).
    """

    jobs: tuple[tuple[float, float, float, int], ...]  # (submit, wait, runtime, nodes)
    log_nodes: int
    start: float = 0.0
    name: str = "log"

    def __post_init__(self) -> None:
        if self.log_nodes < 1 or not self.jobs:
            raise ValueError("a background log needs jobs and at least one node")
        if self.start < 0:
            raise ValueError("a background window starts at 0 or later")

    @property
    def span(self) -> float:
        return self.jobs[-1][0]

    def window(self, index: int) -> float:
        """Where cluster ``index`` starts replaying (seconds from the log's start)."""
        span = self.span
        return (self.start + index * WEEK) % span if span > 0 else 0.0

    def for_cluster(self, index: int, nodes: int
                    ) -> tuple[list[tuple[float, int]], list[tuple[float, float, int]]]:
        """Cluster ``index``'s jobs (``nodes`` of them): the ones running at time 0 as
        (remaining run time, size), and the queue as (arrival, run time, size) in order
        (those waiting at the window's start arrive at 0)."""
        begin = self.window(index)
        scale = nodes / self.log_nodes
        running: list[tuple[float, int]] = []
        arrivals: list[tuple[float, float, int]] = []
        for submit, wait, runtime, size in self.jobs:
            scaled = min(nodes, max(1, round(size * scale)))
            if submit < begin:
                started = submit + wait
                if started <= begin < started + runtime:
                    running.append((started + runtime - begin, scaled))
                elif begin < started:
                    arrivals.append((0.0, runtime, scaled))
            else:
                arrivals.append((submit - begin, runtime, scaled))
        return running, arrivals


@dataclass
class TraceLoad:
    """Drives a :class:`TraceBackground` on a set of simulated clusters; counts the local
    jobs and their busy node-seconds (:meth:`stats`)."""

    spec: TraceBackground
    clusters: list[SimCluster]
    stop: bool = False
    _queues: dict[str, deque[JobSpec]] = field(init=False, default_factory=dict)
    _started: list[tuple[float, int, float]] = field(init=False, default_factory=list)
    _submitted: int = field(init=False)
    _count: int = field(init=False)

    def __post_init__(self) -> None:
        self._submitted = 0
        self._count = 0
        for index, cluster in enumerate(self.clusters):
            queue: deque[JobSpec] = deque()
            self._queues[cluster.name] = queue
            running, arrivals = self.spec.for_cluster(index, cluster.nodes)
            for remaining, size in running:  # what no longer fits (rounding) waits first
                queue.append(self._spec(cluster, size, remaining))
            self._arrivals(cluster, iter(arrivals))
        self.start_waiting()

    def _spec(self, cluster: SimCluster, size: int, runtime: float) -> JobSpec:
        self._count += 1
        self._submitted += 1
        return JobSpec(f"bg-{cluster.name}-{self._count}", JobKind.RIGID, size, size, size,
                       submit_time=cluster.engine.now, runtime=runtime)

    def _arrivals(self, cluster: SimCluster, arrivals: Iterator[tuple[float, float, int]]
                  ) -> None:
        """Queue the arrivals due now, then schedule the next one (one event at a time)."""
        now = cluster.engine.now
        for item in arrivals:
            if item[0] > now:
                self._later(cluster, item, arrivals)
                return
            self._queues[cluster.name].append(self._spec(cluster, item[2], item[1]))

    def _later(self, cluster: SimCluster, due: tuple[float, float, int],
               rest: Iterator[tuple[float, float, int]]) -> None:
        cluster.engine.at(due[0], lambda: self._arrive(cluster, due, rest), ARRIVAL)

    def _arrive(self, cluster: SimCluster, first: tuple[float, float, int],
                rest: Iterator[tuple[float, float, int]]) -> None:
        if self.stop:
            return
        self._queues[cluster.name].append(self._spec(cluster, first[2], first[1]))
        self._arrivals(cluster, rest)

    def start_waiting(self) -> None:
        """Start the local jobs that fit, in order, on every cluster."""
        for cluster in self.clusters:
            queue = self._queues[cluster.name]
            while queue and queue[0].min_size <= cluster.idle:
                spec = queue.popleft()
                assert spec.runtime is not None
                cluster.start(spec, spec.min_size, managed=False)
                self._started.append((cluster.engine.now, spec.min_size,
                                      spec.runtime / cluster.speed))

    def stats(self, end: float) -> dict[str, float]:
        """Local jobs submitted and started by ``end``, their busy node-seconds until then,
        and that area over the platform's capacity from 0 to ``end``."""
        area = sum(size * max(0.0, min(end, start + duration) - start)
                   for start, size, duration in self._started)
        capacity = sum(c.nodes for c in self.clusters) * end
        return {"background_jobs": self._submitted,
                "background_started": len(self._started),
                "background_utilization": area / capacity if capacity > 0 else 0.0}


def background_replay(path: str | Path, window: str, seed: int) -> TraceBackground:
    """The replay of the log at ``path`` as local users' load (``simulate
    --background-trace``) from ``window``: a start in seconds from the log's first submit,
    or ``seed``: a start on the hour drawn by ``seed`` among those within the log."""
    from malleable.errors import InputError
    from malleable.workloads.reallog import background_jobs, read_log

    log = read_log(path)
    if window == "seed":
        start = 3600.0 * random.Random(seed).randrange(int(log.span // 3600) + 1)
    else:
        try:
            start = float(window)
        except ValueError:
            start = -1.0
        if not (math.isfinite(start) and start >= 0):
            raise InputError(f"--background-window {window!r}: give a start in seconds "
                             "(0 or more) or seed")
    return TraceBackground(background_jobs(log), log.nodes, start % max(log.span, 1.0),
                           log.name)
