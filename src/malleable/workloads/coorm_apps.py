"""Application models of section IV-A: rigid, simple-moldable (Amdahl) and the CEM.

Times are seconds on a cluster of speed 1; a cluster ``s`` times faster runs the
same configuration in ``time / s``. Every model gives both the wall time a
launcher requests (what the schedule reserves) and the run time it really takes
(never more: a job that overran would be killed).

The CEM's model reads the platform through :class:`Platform` (what
:class:`malleable.coorm.resources.Platform` provides), so the models stay below CooRM.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import numpy.typing as npt


class ClusterModel(Protocol):
    """What the CEM model reads of a cluster."""

    @property
    def speed(self) -> float: ...

    @property
    def san_latency(self) -> float: ...


class Platform(Protocol):
    """What the CEM model reads of the platform: clusters and the network between them."""

    def info(self, cid: str) -> ClusterModel: ...

    def latency(self, a: str, b: str) -> float: ...

    @property
    def bandwidth(self) -> float: ...


@dataclass(frozen=True, slots=True)
class Rigid:
    """A legacy job with the host count of the trace (single cluster)."""

    hosts: int
    runtime: float
    walltime: float

    kind = "rigid"

    def __post_init__(self) -> None:
        _check(self.hosts, self.runtime, self.walltime)

    def max_hosts(self, capacity: int) -> int:
        return self.hosts if self.hosts <= capacity else 0

    def walltimes(self, speed: float, upto: int) -> npt.NDArray[np.float64]:
        """Requested time for 1..upto hosts (inf where the job cannot run)."""
        out = np.full(upto, math.inf)
        if 1 <= self.hosts <= upto:
            out[self.hosts - 1] = self.walltime / speed
        return out

    def runtime_on(self, hosts: int, speed: float) -> float:
        return self.runtime / speed


@dataclass(frozen=True, slots=True)
class Amdahl:
    """A simple-moldable job: Amdahl's law around the trace's (hosts, runtime).

    ``serial`` is the sequential fraction; ``T(n) = T1 (serial + (1 - serial) / n)``
    with ``T1`` chosen so that ``T(hosts) = runtime``. The requested time keeps the
    trace's over-estimation ratio ``walltime / runtime`` at every size.
    """

    hosts: int
    runtime: float
    walltime: float
    serial: float
    limit: int = 1 << 30
    """Most hosts the job can use."""

    kind = "amdahl"

    def __post_init__(self) -> None:
        _check(self.hosts, self.runtime, self.walltime)
        if not 0.0 <= self.serial <= 1.0:
            raise ValueError(f"serial fraction {self.serial} outside [0, 1]")

    def max_hosts(self, capacity: int) -> int:
        return min(capacity, self.limit)

    def time(self, n: int | npt.NDArray[np.int64]) -> npt.NDArray[np.float64]:
        t1 = self.runtime / (self.serial + (1.0 - self.serial) / self.hosts)
        return np.asarray(t1 * (self.serial + (1.0 - self.serial) / np.asarray(n, dtype=float)))

    def walltimes(self, speed: float, upto: int) -> npt.NDArray[np.float64]:
        n = np.arange(1, upto + 1)
        out = self.time(n) * (self.walltime / self.runtime) / speed
        out[n > self.limit] = math.inf
        return out

    def runtime_on(self, hosts: int, speed: float) -> float:
        return float(self.time(hosts)) / speed


@dataclass(frozen=True, slots=True)
class Cem:
    """The multi-cluster CEM application of section II, as a performance model.

    Each of ``iterations`` iterations computes ``work`` host-seconds (at speed 1),
    load-balanced over all hosts by speed, then communicates: ``collectives``
    tree collectives over the hosts (``log2 N`` SAN latencies each) and, when it
    spans clusters, ``wan_messages`` exchanges of ``wan_bytes`` over the slowest
    WAN link in use. Start-up costs ``setup`` seconds per cluster. The launcher
    requests exactly the predicted time.
    """

    work: float
    iterations: int
    collectives: int = 4
    wan_messages: int = 10
    wan_bytes: float = 2e5
    setup: float = 5.0

    kind = "cem"

    def __post_init__(self) -> None:
        if self.work <= 0 or self.iterations < 1:
            raise ValueError(f"CEM needs positive work and iterations, not {self.work}, "
                             f"{self.iterations}")

    @classmethod
    def like(cls, hosts: int, runtime: float, per_iteration: float = 0.5) -> Cem:
        """A CEM instance that takes ``runtime`` on ``hosts`` speed-1 hosts (compute only)."""
        iterations = max(1, round(runtime / per_iteration))
        return cls(work=hosts * runtime / iterations, iterations=iterations)

    def runtime(self, hosts: Mapping[str, int], platform: Platform) -> float:
        power = 0.0
        total = 0
        san = 0.0
        used = []
        for cid, n in hosts.items():
            if n > 0:
                info = platform.info(cid)
                power += n * info.speed
                total += n
                san = max(san, info.san_latency)
                used.append(cid)
        if not used:
            return math.inf
        step = self.work / power + self.collectives * san * math.ceil(math.log2(total + 1))
        if len(used) > 1:
            worst = max(platform.latency(a, b) for a in used for b in used if a < b)
            step += self.wan_messages * (worst + self.wan_bytes / platform.bandwidth)
        return self.iterations * step + self.setup * len(used)


#: Models that run on one cluster (the OAR-like baseline enumerates their sizes).
SingleClusterApp = Rigid | Amdahl
App = Rigid | Amdahl | Cem


def _check(hosts: int, runtime: float, walltime: float) -> None:
    if hosts < 1:
        raise ValueError(f"host count {hosts} is below 1")
    if not (0 < runtime <= walltime < math.inf):
        raise ValueError(f"need 0 < runtime ({runtime}) <= walltime ({walltime}) < inf")
