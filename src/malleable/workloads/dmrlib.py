"""The DMRlib study's workloads (section 5.4, Tables 3, 6 and 7).

A workload is drawn once (arrival times and the application of each job) and then
built in any of the job versions, so that the fixed, pure moldable, pure malleable
and flexible workloads of one size differ only in how their jobs may be sized:

* **Arrivals**: Feitelson's model at factor 1 (:mod:`malleable.workloads.feitelson`),
  the first job at time 0; or the submit times of an SWF trace.
* **Applications**: each job is CG, Jacobi, N-body or HPG-aligner with equal
  probability ("jobs randomly corresponding to one of the four applications").
* **Job kinds** (Table 3) from malleability and submission mode (Table 6):

  ============== =============== =============================================
  kind           submission      as a JobSpec
  ============== =============== =============================================
  fixed          rigid, upper    RIGID, size = upper limit
  pure moldable  moldable        MOLDABLE, [lower, upper]
  pure malleable rigid, upper    MALLEABLE, [lower, upper], initial = upper
  flexible       moldable        MALLEABLE, [lower, upper], initial = lower
  ============== =============== =============================================

  Malleable jobs carry the preferred size of Table 5.
* **Wall time** (what EASY backfilling plans with): the application's time at the
  job's smallest possible size, its size for a fixed job and its lower limit
  otherwise. It is exact for fixed jobs and an upper bound on the run time of every
  other job (a moldable or malleable job never runs below its lower limit).
* **Mixes** (section 5.6, Table 7): which jobs are malleable. ``none`` and ``all``;
  a fraction (25, 50, 75%): the first ``round(p * n)`` jobs of a seeded random
  permutation, so the 25% set lies inside the 50% set and that inside the 75% one;
  or one application (every job of that application is malleable).
* **Traces**: an SWF file gives the submit times (shifted so the first is 0) and the
  sizes; the application is drawn as above; the job's upper limit is the trace's
  size clamped into the application's ``[lower, upper]`` range of Table 5; lower and
  preferred sizes are Table 5's (preferred capped at that upper limit). Run times
  come from the application model, not from the trace.
"""

from __future__ import annotations

import enum
import random
from collections.abc import Sequence
from dataclasses import dataclass

from malleable.model import JobKind, JobSpec
from malleable.workloads.dmrlib_apps import APPS, BY_MODEL, App, app_named
from malleable.workloads.feitelson import FeitelsonModel, arrivals
from malleable.workloads.swf import SwfWorkload


class Submission(enum.Enum):
    """How jobs are submitted (Table 6)."""

    RIGID = "rigid"
    """At the upper limit: ``sbatch -N32``."""
    MOLDABLE = "moldable"
    """Between the limits: ``sbatch -N2-32``."""


class Version(enum.Enum):
    """The job versions of Table 3."""

    FIXED = "fixed"
    PURE_MOLDABLE = "pure moldable"
    PURE_MALLEABLE = "pure malleable"
    FLEXIBLE = "flexible"

    @classmethod
    def of(cls, malleable: bool, submission: Submission) -> Version:
        if malleable:
            return cls.FLEXIBLE if submission is Submission.MOLDABLE else cls.PURE_MALLEABLE
        return cls.PURE_MOLDABLE if submission is Submission.MOLDABLE else cls.FIXED

    @property
    def submission(self) -> Submission:
        moldable = self in (Version.PURE_MOLDABLE, Version.FLEXIBLE)
        return Submission.MOLDABLE if moldable else Submission.RIGID

    @property
    def malleable(self) -> bool:
        return self in (Version.PURE_MALLEABLE, Version.FLEXIBLE)


@dataclass(frozen=True)
class Mix:
    """Which jobs of a workload are malleable (section 5.6)."""

    name: str
    fraction: float | None = None
    app: str | None = None

    def malleable(self, index: int, app: App, rank: int, count: int) -> bool:
        """Whether job ``index`` (of application ``app``, permutation ``rank``) is malleable."""
        if self.app is not None:
            return app.label == self.app
        fraction = 0.0 if self.fraction is None else self.fraction
        return rank < round(fraction * count)


NONE = Mix("none", fraction=0.0)
ALL = Mix("all", fraction=1.0)
#: Table 7's columns, in the paper's order.
TABLE7_MIXES: tuple[Mix, ...] = (
    NONE, Mix("25%", fraction=0.25), Mix("50%", fraction=0.5), Mix("75%", fraction=0.75),
    *(Mix(app.label, app=app.label) for app in APPS), ALL,
)


@dataclass(frozen=True)
class Draw:
    """The random part of a workload: when each job arrives and what it runs."""

    submits: tuple[float, ...]
    apps: tuple[App, ...]
    ranks: tuple[int, ...]
    uppers: tuple[int, ...] | None = None
    label: str = "feitelson"

    def __len__(self) -> int:
        return len(self.submits)


def draw(count: int, seed: int, model: FeitelsonModel | None = None) -> Draw:
    """``count`` jobs with Feitelson arrivals and uniformly drawn applications."""
    rng = random.Random(seed * 7919 + 17)
    apps = tuple(rng.choice(APPS) for _ in range(count))
    times = arrivals(count, seed, model or FeitelsonModel())
    return Draw(tuple(times), apps, _ranks(rng, count))


def from_trace(trace: SwfWorkload, count: int | None, seed: int) -> Draw:
    """Arrivals and sizes from a trace (see the module docstring for the rule)."""
    jobs = sorted(trace.jobs, key=lambda j: j.submit_time)
    if count is not None:
        jobs = jobs[:count]
    rng = random.Random(seed * 7919 + 17)
    apps = tuple(rng.choice(APPS) for _ in jobs)
    first = jobs[0].submit_time if jobs else 0.0
    uppers = tuple(min(max(j.initial_size, a.lower), a.upper) for j, a in zip(jobs, apps,
                                                                                strict=True))
    return Draw(tuple(j.submit_time - first for j in jobs), apps, _ranks(rng, len(jobs)),
                uppers, "trace")


def _ranks(rng: random.Random, count: int) -> tuple[int, ...]:
    order = list(range(count))
    rng.shuffle(order)
    ranks = [0] * count
    for rank, index in enumerate(order):
        ranks[index] = rank
    return tuple(ranks)


def build(workload: Draw, submission: Submission, mix: Mix = NONE) -> list[JobSpec]:
    """The workload's jobs, submitted ``submission`` with the ``mix`` malleable."""
    count = len(workload)
    specs = []
    for i, (submit, app, rank) in enumerate(zip(workload.submits, workload.apps, workload.ranks,
                                                strict=True)):
        version = Version.of(mix.malleable(i, app, rank, count), submission)
        upper = workload.uppers[i] if workload.uppers is not None else app.upper
        specs.append(job_spec(app, version, str(i + 1), submit, upper))
    return specs


def job_spec(app: App, version: Version, job_id: str, submit: float,
             upper: int | None = None) -> JobSpec:
    """One job of ``app`` in ``version`` (Table 3), upper limit ``upper`` (Table 5's)."""
    high = app.upper if upper is None else upper
    low = min(app.lower, high)
    preferred = min(app.preferred, high)
    if version is Version.FIXED:
        return JobSpec(job_id, JobKind.RIGID, high, high, high, submit_time=submit,
                       app=app.model, walltime=app.time(high))
    kind = JobKind.MALLEABLE if version.malleable else JobKind.MOLDABLE
    initial = high if version is Version.PURE_MALLEABLE else low
    return JobSpec(job_id, kind, low, high, initial, submit_time=submit, app=app.model,
                   preferred_size=preferred, walltime=app.time(low))


def interval(spec: JobSpec, size: int) -> float:
    """Seconds between reconfiguration points of a study job (its application's rule)."""
    app = BY_MODEL.get(spec.app) or app_named(spec.app)
    return app.reconfig_interval(spec, size)


def versions_of(specs: Sequence[JobSpec]) -> dict[str, int]:
    """How many jobs of each kind a workload has (for reports and tests)."""
    counts: dict[str, int] = {}
    for spec in specs:
        counts[spec.kind.value] = counts.get(spec.kind.value, 0) + 1
    return counts
