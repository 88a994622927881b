"""Malleable jobs from Downey's moldable model (section 4.1, Table 1).

Downey (1997) draws a job's total work (node-seconds on one processor) and its
average parallelism ``A`` from log-uniform distributions: ``P(work < t) = b0 + b1 ln t``
with Table 1's ``b0 = -0.14`` and ``b1 = 0.073``, and ``A`` log-uniform in [1, 256]
(``min_parallelism`` raises the lower end: the contention-bound regime).
Jobs arrive as a Poisson process; ``n = 160 * rho`` jobs make the offered load ``rho``,
so the arrival rate is ``rho * P / E[work]`` and the arrival window, about
``160 * E[work] / P``, does not depend on ``n``.

The job's span ``work / A`` is cut into phases of ``10 L`` (the last one shorter), each
phase one of the seven curves of :mod:`~malleable.sim.quantum.profiles` drawn at
random, increasing on even phases and decreasing on odd ones (the increase/decrease
blocks), every phase with average parallelism ``A``.

Time scale: the paper does not say how Downey's seconds map onto its 1 ms quanta;
taken literally one job could span billions of quanta. ``work_scale`` (quanta per
Downey second) maps work into ``L``-processor units; see docs/acds.md for the
default and its consequences.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from malleable.sim.quantum.profiles import PROFILES, Profile, phase_heights

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]


@dataclass(frozen=True)
class DowneyParams:
    """Table 1 and the time scale (work in ``L`` times processors)."""

    processors: int = 256
    max_parallelism: float = 256.0
    min_parallelism: float = 1.0
    """Lower end of the log-uniform average parallelism: 1 in Table 1; a larger value is
    the contention-bound regime (docs/acds.md), an option, not the paper's setting."""
    beta0: float = -0.14
    beta1: float = 0.073
    jobs_per_load: float = 160.0
    work_scale: float = 1e-3
    phase_length: float = 10.0
    segments: int = 10

    def __post_init__(self) -> None:
        if self.beta1 <= 0:
            raise ValueError(f"beta1 {self.beta1} must be positive (a rising cdf)")
        if self.work_scale <= 0 or self.phase_length <= 0 or self.segments < 1:
            raise ValueError("work_scale, phase_length and segments must be positive")
        if self.max_parallelism < 1 or self.processors < 1:
            raise ValueError("max_parallelism and processors must be at least 1")
        if not 1 <= self.min_parallelism <= self.max_parallelism:
            raise ValueError(f"min_parallelism {self.min_parallelism} must be in "
                             f"[1, max_parallelism {self.max_parallelism:g}]")

    @property
    def log_work_range(self) -> tuple[float, float]:
        """ln of the smallest and largest work, in Downey seconds (cdf 0 and 1)."""
        return -self.beta0 / self.beta1, (1 - self.beta0) / self.beta1

    @property
    def mean_work(self) -> float:
        """E[work] in ``L``-processor units."""
        lo, hi = self.log_work_range
        return self.work_scale * (math.exp(hi) - math.exp(lo)) / (hi - lo)

    def arrival_rate(self, jobs: int) -> float:
        """Jobs per ``L`` so that ``jobs`` jobs make load ``jobs / jobs_per_load``."""
        load = jobs / self.jobs_per_load
        return load * self.processors / self.mean_work


#: Table 1 with the default time scale.
DEFAULT_PARAMS = DowneyParams()


@dataclass(frozen=True)
class JobSet:
    """Jobs as flat arrays; job ``i``'s segments are ``start[i]:start[i+1]``."""

    release: FloatArray
    work: FloatArray
    parallelism: FloatArray
    heights: FloatArray
    spans: FloatArray
    start: IntArray

    def __len__(self) -> int:
        return len(self.release)

    @property
    def span(self) -> FloatArray:
        """Each job's total span (time on infinitely many processors)."""
        return np.add.reduceat(self.spans, self.start[:-1]) if len(self) else np.zeros(0)

    def job(self, i: int) -> tuple[FloatArray, FloatArray]:
        """Heights and spans of job ``i``'s segments."""
        sl = slice(int(self.start[i]), int(self.start[i + 1]))
        return self.heights[sl], self.spans[sl]


def sample_downey(n: int, rng: np.random.Generator, params: DowneyParams
                  ) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Release times, works and average parallelisms of ``n`` jobs."""
    lo, hi = params.log_work_range
    work = np.exp(rng.uniform(lo, hi, n)) * params.work_scale
    parallelism = np.exp(rng.uniform(math.log(params.min_parallelism),
                                     math.log(params.max_parallelism), n))
    gaps = rng.exponential(1.0 / params.arrival_rate(n), n) if n else np.zeros(0)
    return np.cumsum(gaps), work, parallelism


def shape_table(segments: int) -> FloatArray:
    """``table[profile, decreasing, piece]``: mean of ``(h - 1) / (A - 1)`` on each piece."""
    return np.stack([np.stack([(phase_heights(p, 2.0, inc, segments) - 1.0)
                               for inc in (True, False)]) for p in PROFILES])


def build_jobs(release: FloatArray, work: FloatArray, parallelism: FloatArray,
               rng: np.random.Generator, params: DowneyParams = DEFAULT_PARAMS,
               profiles: Sequence[Profile] = PROFILES) -> JobSet:
    """Cut each job into phases of curves drawn from ``profiles`` (module docstring)."""
    seg = params.segments
    length = np.asarray(work, dtype=np.float64) / np.asarray(parallelism, dtype=np.float64)
    phases = np.maximum(1, np.ceil(length / params.phase_length - 1e-9)).astype(np.int64)
    job = np.repeat(np.arange(len(length)), phases)
    first = np.cumsum(phases) - phases
    index = np.arange(len(job)) - first[job]
    allowed = np.array([PROFILES.index(p) for p in profiles])
    kinds = allowed[rng.integers(0, len(allowed), len(job))]
    table = shape_table(seg)
    a = np.asarray(parallelism, dtype=np.float64)[job]
    heights = 1.0 + (a - 1.0)[:, None] * table[kinds, index % 2]
    phase_span = np.minimum(params.phase_length, length[job] - index * params.phase_length)
    spans = np.repeat(phase_span / seg, seg)
    start = np.concatenate([[0], np.cumsum(phases * seg)]).astype(np.int64)
    return JobSet(np.asarray(release, dtype=np.float64), np.asarray(work, dtype=np.float64),
                  a[first] if len(job) else np.zeros(0), heights.reshape(-1), spans, start)


def downey_jobs(n: int, rng: np.random.Generator, params: DowneyParams = DEFAULT_PARAMS,
                profiles: Sequence[Profile] = PROFILES) -> JobSet:
    """``n`` malleable jobs of Downey's model with Poisson arrivals."""
    release, work, parallelism = sample_downey(n, rng, params)
    return build_jobs(release, work, parallelism, rng, params, profiles)
