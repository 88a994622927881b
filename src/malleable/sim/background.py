"""Background load: local users who submit straight to a cluster, bypassing the manager.

Their jobs arrive as a Poisson process per cluster, ask for a uniform number of
nodes in ``[min_size, max_size]`` and run for an exponential time; each cluster
starts them first-come-first-served as its nodes allow. To the manager they are
just nodes that are busy (``managed=False`` in the view), as on a real cluster.
"""

from __future__ import annotations

import random
from collections import deque
from dataclasses import dataclass, field

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
