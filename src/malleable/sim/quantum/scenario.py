"""Scenarios (a random tree and a job set on it) and batches of them.

A scenario is one repetition of one experiment point: a random tree of ``levels``
levels (1 to 5 children per node), ``jobs`` Downey jobs, and each job's leaf drawn
uniformly (section 4.2). The same seed gives the same scenario whatever the
algorithm, so algorithms are compared on identical inputs.

:func:`run_many` simulates many runs (scenario, algorithm, cost factor) at once
and returns the makespan and the utilizations of each.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from malleable.policies.hierarchical.tree import TreeLayout, random_tree
from malleable.sim.quantum.engine import (
    Algorithm,
    EngineConfig,
    Outcome,
    Platform,
    RunSpec,
    simulate_many,
)
from malleable.sim.quantum.jobs import DEFAULT_PARAMS, DowneyParams, JobSet, downey_jobs

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]


@dataclass(frozen=True)
class Scenario:
    """One tree, its jobs and where they are released."""

    tree: TreeLayout
    jobs: JobSet
    leaf: IntArray


def scenario(levels: int, jobs: int, seed: Sequence[int],
             params: DowneyParams = DEFAULT_PARAMS) -> Scenario:
    """The scenario of ``seed`` (a tuple of ints, e.g. ``(base, n, repetition)``).

    The jobs depend on ``seed`` only, so trees of different depths get the same jobs;
    the tree and the jobs' leaves depend on ``seed`` and ``levels``.
    """
    job_set = downey_jobs(jobs, np.random.default_rng(np.random.SeedSequence(list(seed))),
                          params)
    rng = np.random.default_rng(np.random.SeedSequence([*seed, levels]))
    tree = random_tree(levels, rng)
    leaf = rng.integers(0, tree.count(2), len(job_set)).astype(np.int64)
    return Scenario(tree, job_set, leaf)


@dataclass(frozen=True)
class RunMetrics:
    """What the figures plot, for one scenario under one algorithm."""

    makespan: float
    utilization: float
    """Work done over processor time allotted to running jobs (the paper's utilization)."""
    platform_utilization: float
    """Work done over ``P`` times the makespan."""
    lower_bound: float
    """Theorem 1's lower bound on any schedule: ``max(max_i r_i + l_i, sum w / P)``."""
    span_bound: bool
    """Whether the span term ``max_i r_i + l_i`` is the larger one."""


def run_batch(scenarios: Sequence[Scenario], config: EngineConfig) -> list[RunMetrics]:
    """Simulate ``scenarios`` together under one configuration (all of one depth)."""
    return run_many([(s, config.algorithm, config.cost_factor) for s in scenarios],
                    config.platform)


def run_many(runs: Sequence[tuple[Scenario, Algorithm, float]], platform: Platform
             ) -> list[RunMetrics]:
    """Simulate ``(scenario, algorithm, cost factor)`` runs together (one depth)."""
    specs = [RunSpec(s.jobs, s.leaf, s.tree, alg, cf) for s, alg, cf in runs]
    outcomes = simulate_many(specs, platform)
    return [metrics(s, o, platform.processors) for (s, _, _), o in
            zip(runs, outcomes, strict=True)]


def metrics(s: Scenario, outcome: Outcome, processors: float) -> RunMetrics:
    """The figures' numbers for one run."""
    makespan = float(np.max(outcome.completion, initial=0.0))
    work = float(s.jobs.work.sum())
    held = float(outcome.held.sum())
    span = float(np.max(s.jobs.release + s.jobs.span, initial=0.0))
    return RunMetrics(makespan, work / held if held > 0 else 1.0,
                      work / (processors * makespan) if makespan > 0 else 1.0,
                      max(span, work / processors), span >= work / processors)
