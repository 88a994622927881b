"""Theorem 1 (and Lemma 1 behind it) on generated job sets.

With one quantum length at every level and no reallocation cost, AC-DS's makespan is
at most ``2(c+1) * max(l_k + r_k, sum w / P)``, ``c`` being the transition factor: the
largest ratio between a job's average parallelism in two adjacent quanta. We bound
``c`` from each job's profile alone: two adjacent quanta cover at most ``L`` of span
each, so both lie within ``L`` of the point between them and their averages lie
between the smallest and largest parallelism there; the first quantum is compared
with the initial desire, 1. Releases are put on quantum boundaries, as the theorem's
model has them.

Lemma 1 (``t_S <= (c+1) l`` and ``a_T <= (c+1) w`` per job) is checked too, with the
discrete model's one allowance: satisfied time is counted in whole quanta, so a job
shorter than a quantum still counts one.
"""

from __future__ import annotations

import numpy as np
import pytest

from malleable.policies.hierarchical.tree import random_tree
from malleable.sim.quantum.engine import Algorithm, Platform, RunSpec, simulate_many
from malleable.sim.quantum.jobs import DowneyParams, JobSet, build_jobs, sample_downey
from malleable.sim.quantum.profiles import Profile

SMOOTH = (Profile.STEP, Profile.POLY2, Profile.RAMP, Profile.POLY1)


def transition_factor(heights: np.ndarray, spans: np.ndarray, quantum: float = 1.0) -> float:
    """An upper bound on the job's transition factor (see the module docstring)."""
    ends = np.cumsum(spans)
    starts = ends - spans
    lo = np.searchsorted(ends, starts - quantum, side="right")
    hi = np.searchsorted(starts, ends + quantum, side="left")
    c = max(float(heights[a:b].max() / heights[a:b].min()) for a, b in zip(lo, hi, strict=True))
    first = heights[: max(1, int(np.searchsorted(starts, quantum, side="left")))]
    return max(c, float(first.max()))


def _job_set(n: int, seed: int, params: DowneyParams, profiles: tuple[Profile, ...]) -> JobSet:
    rng = np.random.default_rng(seed)
    release, work, parallelism = sample_downey(n, rng, params)
    return build_jobs(np.floor(release), work, parallelism, rng, params, profiles)


CASES = [  # (levels, jobs, max parallelism, profiles)
    (2, 40, 8.0, SMOOTH), (3, 120, 8.0, SMOOTH), (5, 200, 16.0, SMOOTH),
    (3, 60, 256.0, tuple(Profile)), (5, 150, 256.0, tuple(Profile)),
]


@pytest.mark.parametrize(("levels", "n", "max_par", "profiles"), CASES)
def test_makespan_within_theorem_1_and_lemma_1(levels: int, n: int, max_par: float,
                                               profiles: tuple[Profile, ...]) -> None:
    params = DowneyParams(work_scale=2e-4, max_parallelism=max_par)
    runs, sets = [], []
    for seed in range(3):
        jobs = _job_set(n, 100 * levels + seed, params, profiles)
        rng = np.random.default_rng(seed)
        tree = random_tree(levels, rng)
        leaf = rng.integers(0, tree.count(2), n).astype(np.int64)
        runs.append(RunSpec(jobs, leaf, tree, Algorithm.ACDS))
        sets.append(jobs)
    processors = 64.0
    for jobs, out in zip(sets, simulate_many(runs, Platform(processors)), strict=True):
        c = np.array([transition_factor(*jobs.job(i)) for i in range(len(jobs))])
        span, work, release = jobs.span, jobs.work, jobs.release
        last = int(np.argmax(out.completion))
        makespan = float(out.completion[last])
        lower = max(float(span[last] + release[last]), float(work.sum()) / processors)
        assert makespan <= 2 * (c.max() + 1) * lower  # Theorem 1
        # the proof's sharper form, job by job
        assert makespan <= (release[last] + (c[last] + 1) * span[last]
                            + float(((c + 1) * work).sum()) / processors) + 1e-9
        # Lemma 1, in whole quanta: a job is satisfied or not for a whole quantum, so its
        # last, partial one may add one; the allocation counts the time the job ran.
        assert np.all(out.satisfied <= (c + 1) * span + 1 + 1e-9)
        assert np.all(out.held <= (c + 1) * work + 1e-9)
