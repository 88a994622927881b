"""The runs behind the DMRlib study and the figures each one yields.

One run simulates one workload (a size, a submission mode, a mix of malleable jobs,
a seed) on the study's platform: one cluster of 128 nodes, the manager with
:class:`~malleable.policies.easy.EasyPolicy` when no job is malleable or
:class:`~malleable.policies.dmr_study.EasyDmrPolicy` otherwise (polled every 10 s,
Slurm's backfill interval in the paper), a reconfiguration costing ``reconfig_cost``
seconds without progress.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

from malleable.metrics.energy import allocation_rate, energy_kwh
from malleable.model import Cluster, JobState
from malleable.policies.base import Policy
from malleable.policies.dmr_study import EasyDmrPolicy
from malleable.policies.easy import EasyPolicy
from malleable.sim.run import SimConfig, SimResult, simulate
from malleable.workloads.dmrlib import ALL, NONE, Draw, Mix, Submission, Version, build, interval
from malleable.workloads.dmrlib_apps import NODES

POLL = 10.0
"""Seconds between the manager's periodic cycles (Slurm's 10 s backfill interval)."""


@dataclass(frozen=True)
class Setup:
    """What one run simulates."""

    jobs: int
    submission: Submission
    mix: Mix
    seed: int

    @property
    def version(self) -> Version | None:
        """The Table 3 version when every job is alike (None for heterogeneous mixes)."""
        if self.mix == NONE:
            return Version.of(False, self.submission)
        if self.mix == ALL:
            return Version.of(True, self.submission)
        return None


@dataclass
class Outcome:
    """The figures of one run (times in seconds, energy in kWh)."""

    setup: Setup
    mean_wait: float
    mean_execution: float
    mean_completion: float
    workload_time: float
    allocation: float
    energy: float
    completed: int
    grows: int
    shrinks: int
    ends: list[float] = field(default_factory=list)
    busy: list[tuple[float, int]] = field(default_factory=list)
    running: list[tuple[float, int]] = field(default_factory=list)


def policy_for(mix: Mix, multiples: bool = True, pooled: bool = False) -> Policy:
    """EASY alone for non-malleable workloads, EASY + DMR otherwise (``pooled``: the pooled
    reading of Algorithm 2, see :mod:`malleable.policies.dmr_study`)."""
    if mix == NONE:
        return EasyPolicy()
    return EasyDmrPolicy(interval=interval, multiples=multiples, pooled=pooled)


def run(setup: Setup, workload: Draw, reconfig_cost: float = 1.0, keep_series: bool = False,
        multiples: bool = True, pooled: bool = False) -> Outcome:
    """Simulate one workload and measure it."""
    specs = build(workload, setup.submission, setup.mix)
    config = SimConfig(reconfig_cost=reconfig_cost,
                       poll_interval=None if setup.mix == NONE else POLL,
                       timeline=True)
    policy = policy_for(setup.mix, multiples, pooled)
    result = simulate(specs, (Cluster("marenostrum", NODES),), policy, config)
    return measure(setup, result, keep_series)


def measure(setup: Setup, result: SimResult, keep_series: bool = False) -> Outcome:
    """The study's metrics of a finished simulation."""
    done = [r for r in result.records if r.state is JobState.COMPLETED]
    span = result.end - result.start
    busy = result.busy_area
    ops = result.operations
    outcome = Outcome(
        setup, _mean([r.wait for r in done]), _mean([r.execution for r in done]),
        _mean([r.response for r in done]), span, allocation_rate(NODES, span, busy),
        energy_kwh(NODES, span, busy), len(done),
        sum(1 for op in ops if op.kind == "grow"), sum(1 for op in ops if op.kind == "shrink"),
        sorted(r.end for r in done if r.end is not None))
    if keep_series:
        outcome.busy = list(next(iter(result.timelines.values()), []))
        outcome.running = running_series([(r.start, r.end) for r in done
                                          if r.start is not None and r.end is not None])
    return outcome


def running_series(spans: Sequence[tuple[float, float]]) -> list[tuple[float, int]]:
    """Step function of the number of running jobs from (start, end) pairs."""
    changes = sorted([(s, 1) for s, _ in spans] + [(e, -1) for _, e in spans])
    series: list[tuple[float, int]] = []
    count = 0
    for time, delta in changes:
        count += delta
        if series and series[-1][0] == time:
            series[-1] = (time, count)
        else:
            series.append((time, count))
    return series


def completed_per_bin(ends: Sequence[float], width: float) -> list[tuple[float, int]]:
    """(bin start, jobs completed in the bin) over the run."""
    if not ends or width <= 0:
        return []
    bins = [0] * (int(max(ends) // width) + 1)
    for end in ends:
        bins[int(end // width)] += 1
    return [(i * width, n) for i, n in enumerate(bins)]


def average(outcomes: Sequence[Outcome]) -> Outcome:
    """The mean of several seeds' outcomes of one setup (series from the first)."""
    first = outcomes[0]
    if len(outcomes) == 1:
        return first

    def m(attr: str) -> float:
        return _mean([float(getattr(o, attr)) for o in outcomes])

    return Outcome(first.setup, m("mean_wait"), m("mean_execution"), m("mean_completion"),
                   m("workload_time"), m("allocation"), m("energy"),
                   round(m("completed")), round(m("grows")), round(m("shrinks")),
                   first.ends, first.busy, first.running)


def _mean(values: Sequence[float]) -> float:
    finite = [v for v in values if not math.isnan(v)]
    return sum(finite) / len(finite) if finite else math.nan
