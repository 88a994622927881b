"""Feitelson's 1996 workload model of parallel jobs ("Packing schemes for gang scheduling").

The model, as the Parallel Workloads Archive summarises it, has four parts; where the
published description leaves numbers open, the values here are ours and named as such:

* **Arrivals.** New jobs arrive as a Poisson process: exponential inter-arrival times
  of mean ``mean_interarrival``. An arrival ``factor`` multiplies every inter-arrival
  time (factor 1 is the model as given; below 1 submits faster, above 1 slower). Our
  default mean is 10 s, which at factor 1 keeps the DMRlib study's 128-node cluster
  saturated ("a highly stressed scenario where jobs are massively submitted").
* **Sizes.** A harmonic distribution of order 1.5 over 1..``max_size`` (probability
  of ``n`` proportional to ``n**-1.5``), hand-tailored to emphasise powers of two and
  small jobs. Our tailoring: powers of two weigh ``pow2_boost`` (3) times more and
  sizes up to 4 weigh ``small_boost`` (1.5) times more.
* **Run times.** A two-branch hyperexponential whose long branch is more likely for
  larger jobs (the weak size-runtime correlation): branch means ``short_mean`` (60 s)
  and ``long_mean`` (3600 s), long-branch probability rising linearly from 0.1 for
  one node to 0.9 for ``max_size`` nodes (our numbers).
* **Repeated runs.** Each job runs ``k`` times, ``k`` harmonic of order 2.5 over
  1..``max_repeats`` (30). In the model a repeat is submitted when the previous run
  ends; an open workload cannot know that, so a repeat is submitted one run time
  after the previous submission (the end had it started at once).

:func:`arrivals` gives only the Poisson arrival times, which is what the DMRlib study
takes from the model (its sizes and run times come from the four applications);
:func:`generate` gives the whole model as rigid jobs of the ``fixed`` application.
"""

from __future__ import annotations

import bisect
import itertools
import random
from dataclasses import dataclass

from malleable.model import JobKind, JobSpec


@dataclass(frozen=True)
class FeitelsonModel:
    """Parameters of the model (see the module docstring for which are the paper's)."""

    mean_interarrival: float = 10.0
    factor: float = 1.0
    max_size: int = 128
    pow2_boost: float = 3.0
    small_boost: float = 1.5
    short_mean: float = 60.0
    long_mean: float = 3600.0
    max_repeats: int = 30

    def __post_init__(self) -> None:
        if not self.mean_interarrival > 0 or not self.factor > 0:
            raise ValueError("the mean inter-arrival time and the arrival factor must be > 0")
        if self.max_size < 1 or self.max_repeats < 1:
            raise ValueError("max_size and max_repeats must be at least 1")
        if not 0 < self.short_mean <= self.long_mean:
            raise ValueError("need 0 < short_mean <= long_mean")

    def size_weights(self) -> list[float]:
        """Unnormalised probability of each size 1..max_size."""
        weights = []
        for n in range(1, self.max_size + 1):
            w = n ** -1.5
            if n & (n - 1) == 0:
                w *= self.pow2_boost
            if n <= 4:
                w *= self.small_boost
            weights.append(w)
        return weights

    def long_probability(self, size: int) -> float:
        """Probability that a job of ``size`` draws its run time from the long branch."""
        if self.max_size == 1:
            return 0.5
        return 0.1 + 0.8 * (size - 1) / (self.max_size - 1)


@dataclass(frozen=True)
class ModelJob:
    """One submission of the model: when, how many nodes, how long, which repeat."""

    submit: float
    size: int
    runtime: float
    job: int
    repeat: int


def arrivals(count: int, seed: int, model: FeitelsonModel = FeitelsonModel()) -> list[float]:
    """``count`` Poisson arrival times starting at 0 (the first job arrives at time 0)."""
    if count < 0:
        raise ValueError(f"job count {count} is negative")
    rng = random.Random(seed)
    mean = model.mean_interarrival * model.factor
    times, now = [], 0.0
    for _ in range(count):
        times.append(now)
        now += rng.expovariate(1.0 / mean)
    return times


def _sampler(weights: list[float]) -> list[float]:
    return list(itertools.accumulate(weights))


def _draw(rng: random.Random, cumulative: list[float]) -> int:
    """1-based index drawn with the given cumulative weights."""
    return bisect.bisect_left(cumulative, rng.random() * cumulative[-1]) + 1


def generate(count: int, seed: int, model: FeitelsonModel = FeitelsonModel()) -> list[ModelJob]:
    """The first ``count`` submissions of the full model (repeats included), by time."""
    if count < 0:
        raise ValueError(f"job count {count} is negative")
    rng = random.Random(seed)
    sizes = _sampler(model.size_weights())
    repeats = _sampler([k ** -2.5 for k in range(1, model.max_repeats + 1)])
    mean = model.mean_interarrival * model.factor
    jobs: list[ModelJob] = []
    times: list[float] = []  # sorted submit times drawn so far
    now, number = 0.0, 0
    # Later jobs (and their repeats) are submitted at ``now`` or after: once ``count``
    # submissions lie at or before ``now``, the first ``count`` are known.
    while bisect.bisect_right(times, now) < count:
        number += 1
        size = _draw(rng, sizes)
        branch = model.long_mean if rng.random() < model.long_probability(size) else \
            model.short_mean
        runtime = rng.expovariate(1.0 / branch)
        submit = now
        for repeat in range(_draw(rng, repeats)):
            jobs.append(ModelJob(submit, size, runtime, number, repeat))
            bisect.insort(times, submit)
            submit += runtime
        now += rng.expovariate(1.0 / mean)
    jobs.sort(key=lambda j: (j.submit, j.job, j.repeat))
    return jobs[:count]


def as_specs(jobs: list[ModelJob], prefix: str = "f") -> list[JobSpec]:
    """The model's submissions as rigid jobs of the ``fixed`` application."""
    return [JobSpec(f"{prefix}{i + 1}", JobKind.RIGID, j.size, j.size, j.size,
                    submit_time=j.submit, app="fixed", runtime=j.runtime, walltime=j.runtime)
            for i, j in enumerate(jobs)]
