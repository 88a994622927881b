"""Lublin and Feitelson's model of rigid parallel jobs (issue 39).

U. Lublin and D. G. Feitelson, "The workload on parallel supercomputers: modeling the
characteristics of rigid jobs", J. Parallel Distrib. Comput. 63(11), 2003 (the model
the Parallel Workloads Archive calls "Lublin 1999"). Written here from the published
description of the model; the parameter values are the published fits (the paper's and
its authors' generator's defaults), the ones marked *reading* are ours.

* **Sizes.** With probability ``serial`` a job is serial (1 node). Otherwise
  ``x = log2(size)`` is drawn from a two-stage uniform: uniform on ``[ulow, umed]``
  with probability ``uprob``, else uniform on ``[umed, uhi]``; with probability
  ``pow2`` (of all jobs) ``x`` is rounded to a whole number (a power-of-two size). The
  size is ``round(2 ** x)``, at most the machine. ``uhi = log2(machine nodes)`` and
  ``umed = uhi - umed_gap`` (the model's rule; ``umed_gap`` 2.5 fitted for 128 nodes):
  on another machine size these two are the model's advice, not fits (a reading).
* **Run times.** ``ln(run time in s)`` is hyper-gamma: gamma(``a1``, ``b1``) with
  probability ``p``, else gamma(``a2``, ``b2``), where ``p = pa * size + pb`` (clamped to
  [0, 1]: larger jobs run longer). A draw above 12 (exp(12) s, 45 h) is drawn again.
* **Arrivals.** ``ln(inter-arrival in s)`` is gamma(``aarr * arar``, ``barr``) (a draw
  above 13, 5 days, is drawn again): the inter-arrival time at the daily cycle's mean
  rate. The daily cycle gives each half-hour ``b`` of the day (0 = 00:00-00:30) the
  weight ``G(k + 0.5) - G(k - 0.5)`` of a gamma(``anum``, ``bnum``) distribution
  function ``G``, ``k`` being the one of ``11 .. 58`` with ``k - 1 = b`` modulo 48;
  weights are divided by their mean. Time runs through the day's half-hours as through a
  clock on which half-hour ``b`` lasts ``weight[b]`` units: a job arrives after its
  inter-arrival time's worth of units (``seconds / 1800``), so busy half-hours get more
  jobs and the mean rate over a day is the drawn one. The workload starts at midnight.
* **Classes.** ``whole`` (the default): one class with the whole sample's fit. ``two``:
  batch and interactive jobs, each with its own fit and arrival stream, merged in time
  (the interactive class's ``uhi`` is the fit's 5.5, at most the machine's).
* **Not in the model**: user estimates of run time (the SWF's requested time is -1: a
  scheduler that needs one takes the run time, exact estimates, a reading), waits,
  users, memory.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

HALF_HOUR = 1800.0
BUCKETS = 48
CYCLE_START = 11  # the first half-hour (1-based) of the fitted day, wrapped round
MAX_LOG_RUNTIME = 12.0
MAX_LOG_INTERARRIVAL = 13.0
MAX_JOBS = 10_000_000


@dataclass(frozen=True)
class JobClass:
    """The fitted parameters of one class of jobs (see the module docstring)."""

    name: str
    serial: float
    pow2: float
    ulow: float
    umed_gap: float
    uprob: float
    a1: float
    b1: float
    a2: float
    b2: float
    pa: float
    pb: float
    aarr: float
    barr: float
    anum: float
    bnum: float
    arar: float
    uhi_cap: float = math.inf  # the largest log2(size) the class's fit has


#: The whole sample's fit (one class; the model's default when types are not told apart).
WHOLE = JobClass("whole", serial=0.244, pow2=0.576, ulow=0.8, umed_gap=2.5, uprob=0.86,
                 a1=4.2, b1=0.94, a2=312.0, b2=0.03, pa=-0.0054, pb=0.78,
                 aarr=10.2303, barr=0.4871, anum=8.1737, bnum=3.9631, arar=1.0225)
#: Batch jobs' fit (``umed = uhi - 2``: 5 on 128 nodes).
BATCH = JobClass("batch", serial=0.2927, pow2=0.6686, ulow=1.2, umed_gap=2.0, uprob=0.875,
                 a1=6.57, b1=0.823, a2=639.1, b2=0.0156, pa=-0.003, pb=0.6986,
                 aarr=6.0415, barr=0.8531, anum=6.1271, bnum=5.2740, arar=1.0519)
#: Interactive jobs' fit (``uhi`` 5.5 at most, ``umed = uhi - 2.5``).
INTERACTIVE = JobClass("interactive", serial=0.1541, pow2=0.625, ulow=1.0, umed_gap=2.5,
                       uprob=0.705, a1=3.8351, b1=0.6605, a2=7.073, b2=0.6856,
                       pa=-0.0118, pb=0.9156, aarr=6.5510, barr=0.6621, anum=8.9186,
                       bnum=3.6680, arar=0.9797, uhi_cap=5.5)
CLASSES = {"whole": (WHOLE,), "two": (BATCH, INTERACTIVE)}


@dataclass(frozen=True)
class ModelJob:
    """One generated job: submit time (s from the start), run time (s), nodes, class."""

    submit: float
    runtime: float
    nodes: int
    kind: str


def gamma_cdf(x: float, shape: float, scale: float) -> float:
    """The gamma(shape, scale) distribution function at ``x`` (power series of the lower
    regularized incomplete gamma function; converges for the daily cycle's arguments)."""
    if x <= 0:
        return 0.0
    z = x / scale
    term = total = 1.0 / shape
    k = shape
    while term > total * 1e-15:
        k += 1.0
        term *= z / k
        total += term
    return min(1.0, total * math.exp(-z + shape * math.log(z) - math.lgamma(shape)))


def cycle_weights(anum: float, bnum: float) -> list[float]:
    """The 48 half-hours' weights of the daily cycle (mean 1), half-hour 0 first."""
    weights = [0.0] * BUCKETS
    for k in range(CYCLE_START, CYCLE_START + BUCKETS):
        weights[(k - 1) % BUCKETS] = (gamma_cdf(k + 0.5, anum, bnum)
                                      - gamma_cdf(k - 0.5, anum, bnum))
    mean = sum(weights) / BUCKETS
    return [w / mean for w in weights]


class _Stream:
    """One class's jobs in arrival order."""

    def __init__(self, cls: JobClass, nodes: int, rng: np.random.Generator) -> None:
        self.cls, self.rng, self.nodes = cls, rng, nodes
        self.uhi = min(math.log2(nodes), cls.uhi_cap)
        self.umed = max(cls.ulow, self.uhi - cls.umed_gap)
        self.weights = cycle_weights(cls.anum, cls.bnum)
        self.bucket, self.within, self.clock = 0, 0.0, 0.0
        self.next_arrival = self._advance()

    def _draw(self, shape: float, scale: float, ceiling: float) -> float:
        while True:
            value = float(self.rng.gamma(shape, scale))
            if value <= ceiling:
                return value

    def _advance(self) -> float:
        """The next arrival: the drawn inter-arrival's units spent on the daily clock."""
        units = math.exp(self._draw(self.cls.aarr * self.cls.arar, self.cls.barr,
                                    MAX_LOG_INTERARRIVAL)) / HALF_HOUR
        while True:
            weight = self.weights[self.bucket]
            room = weight * (1.0 - self.within)
            if units <= room:
                self.within += units / weight
                break
            units -= room
            self.bucket, self.within = (self.bucket + 1) % BUCKETS, 0.0
            self.clock += HALF_HOUR
        return self.clock + self.within * HALF_HOUR

    def size(self) -> int:
        cls, rng = self.cls, self.rng
        u = float(rng.random())
        if u <= cls.serial:
            return 1
        low, high = ((cls.ulow, self.umed) if float(rng.random()) <= cls.uprob
                     else (self.umed, self.uhi))
        x = low + float(rng.random()) * (high - low)
        if u <= cls.serial + cls.pow2:
            x = float(round(x))
        return max(1, min(self.nodes, math.floor(math.pow(2.0, x) + 0.5)))

    def runtime(self, size: int) -> float:
        cls = self.cls
        p = min(1.0, max(0.0, cls.pa * size + cls.pb))
        shape, scale = (cls.a1, cls.b1) if float(self.rng.random()) <= p else (cls.a2, cls.b2)
        return max(1.0, float(round(math.exp(self._draw(shape, scale, MAX_LOG_RUNTIME)))))

    def pop(self) -> ModelJob:
        size = self.size()
        job = ModelJob(self.next_arrival, self.runtime(size), size, self.cls.name)
        self.next_arrival = self._advance()
        return job


def generate(jobs: int, nodes: int = 128, seed: int = 1, classes: str = "whole"
             ) -> list[ModelJob]:
    """``jobs`` jobs of the model for a machine of ``nodes`` nodes, in arrival order,
    seeded (the same arguments always give the same jobs)."""
    if not 1 <= jobs <= MAX_JOBS:
        raise ValueError(f"jobs must lie in 1..{MAX_JOBS}")
    if nodes < 2:
        raise ValueError("the machine needs at least 2 nodes")
    if classes not in CLASSES:
        raise ValueError(f"classes: one of {', '.join(CLASSES)}")
    rng = np.random.default_rng(seed)
    streams = [_Stream(cls, nodes, rng) for cls in CLASSES[classes]]
    made = []
    for _ in range(jobs):
        stream = min(streams, key=lambda s: s.next_arrival)
        made.append(stream.pop())
    return made


def swf_lines(jobs: list[ModelJob], nodes: int, seed: int, classes: str) -> list[str]:
    """The jobs as a plain SWF log (18 fields; header MaxNodes = MaxProcs = ``nodes``;
    queue 1 for batch and whole-sample jobs, 0 for interactive ones; requested time -1)."""
    lines = ["; Version: 2.2",
             f"; Note: Lublin-Feitelson 2003 model (malleable.workloads.lublin), "
             f"{len(jobs)} jobs, classes {classes}, seed {seed}",
             f"; MaxNodes: {nodes}", f"; MaxProcs: {nodes}"]
    for index, job in enumerate(jobs, 1):
        queue = 0 if job.kind == "interactive" else 1
        lines.append(f"{index} {round(job.submit)} -1 {round(job.runtime)} {job.nodes} -1 -1 "
                     f"{job.nodes} -1 -1 1 -1 -1 -1 {queue} -1 -1 -1")
    return lines


def write_swf(path: str | Path, jobs: int, nodes: int = 128, seed: int = 1,
              classes: str = "whole") -> Path:
    """Generate and write the model's jobs as an SWF log at ``path``."""
    path = Path(path)
    made = generate(jobs, nodes, seed, classes)
    path.write_text("\n".join(swf_lines(made, nodes, seed, classes)) + "\n", encoding="utf-8")
    return path

