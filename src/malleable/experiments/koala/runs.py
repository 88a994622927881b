"""The runs behind the KOALA paper's Figs. 7 and 8, and what we keep of each.

A :class:`Combo` is one curve of a figure (approach, policy, workload); a
:class:`Variant` is a platform setting (the paper's setting, or a sensitivity
setting: local users' load, a reconfiguration cost, a release delay). Each run
keeps per-job figures, the manager's operations and the utilization step
function, which is all the figures, the findings and the report need.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, replace

from malleable.experiments.executor import Executor, Local
from malleable.metrics.records import JobRecord
from malleable.metrics.summary import summarize, utilization_series
from malleable.model import DAS3, JobKind, JobSpec
from malleable.policies.koala import KoalaPolicy
from malleable.sim.background import BackgroundSpec, TraceBackground
from malleable.sim.model_options import ModelOptions
from malleable.sim.run import SimConfig, SimResult, simulate
from malleable.workloads.koala import koala_workload

#: How workloads are written in the paper.
WORKLOAD_LABELS = {"wm": "Wm", "wmr": "Wmr", "wm-prime": "W'm", "wmr-prime": "W'mr"}


@dataclass(frozen=True)
class Combo:
    """One curve: an approach, a malleability policy and a workload."""

    figure: str  # "7", "8" or "baseline"
    approach: str
    policy: str
    workload: str

    @property
    def key(self) -> str:
        return f"{self.approach}/{self.policy}/{self.workload}"

    @property
    def label(self) -> str:
        name = "none" if self.approach == "none" else self.policy.upper()
        return f"{name} · {WORKLOAD_LABELS[self.workload]}"


FIG7 = tuple(Combo("7", "pra", p, w) for w in ("wm", "wmr") for p in ("fpsma", "egs"))
FIG8 = tuple(Combo("8", "pwa", p, w) for w in ("wm-prime", "wmr-prime") for p in ("fpsma", "egs"))
BASELINE = tuple(Combo("baseline", "none", "fpsma", w) for w in WORKLOAD_LABELS)
COMBOS = FIG7 + FIG8 + BASELINE


def baseline_of(combo: Combo) -> Combo:
    """The no-malleability run of the same workload."""
    return next(b for b in BASELINE if b.workload == combo.workload)


@dataclass(frozen=True)
class Variant:
    """A platform setting; ``paper`` is the paper's, the others are sensitivity runs."""

    name: str
    description: str
    reconfig_cost: float = 0.0
    release_delay: float = 0.0
    background: BackgroundSpec | None = None
    model: ModelOptions | None = None
    grow_threshold: float = 1.0
    rate: float = 1.0  # arrival rate, as a multiple of the paper's
    tuning: bool = False  # levels chosen by us, not the paper's
    background_trace: TraceBackground | None = None  # a real log's users (real data)

    def config(self, seed: int, timeline: bool = True) -> SimConfig:
        return SimConfig(reconfig_cost=self.reconfig_cost, release_delay=self.release_delay,
                         background=self.background, seed=seed, timeline=timeline,
                         model=self.model, background_trace=self.background_trace)

    def workload(self, name: str, seed: int) -> list[JobSpec]:
        """The workload, its arrivals ``rate`` times as frequent as the paper's."""
        jobs = koala_workload(name, seed)
        if self.rate == 1.0:
            return jobs
        return [replace(j, submit_time=j.submit_time / self.rate) for j in jobs]


PAPER = Variant("paper", "the paper's setting: no local users, instant resizes")
#: Round levels (25% and 50% of the platform, 30 s), not tuned to make a finding appear;
#: each changes one thing of the paper's setting.
SENSITIVITY = (
    Variant("local-25", "local users bypassing the manager, about 25% of the platform "
            "(per cluster: a job every 600 s, 1-8 nodes, mean 1800 s)",
            background=BackgroundSpec(interarrival=600.0, runtime=1800.0, min_size=1,
                                      max_size=8)),
    Variant("local-50", "local users bypassing the manager, about 50% of the platform "
            "(per cluster: a job every 300 s, 1-8 nodes, mean 1800 s)",
            background=BackgroundSpec(interarrival=300.0, runtime=1800.0, min_size=1,
                                      max_size=8)),
    Variant("reconfig-30", "each grow or shrink costs the job 30 s without progress",
            reconfig_cost=30.0),
    Variant("release-30", "shrunk nodes are released 30 s after the job agreed",
            release_delay=30.0),
)
VARIANTS = (PAPER, *SENSITIVITY)


@dataclass(frozen=True, slots=True)
class JobRow:
    """The per-job figures the panels and findings use (times in seconds)."""

    app: str
    malleable: bool
    avg_size: float
    max_size: int
    execution: float
    response: float
    wait: float
    shared: bool  # ran at the same time as another malleable job on its cluster


@dataclass
class Run:
    """One simulation: a combo, a variant and a seed."""

    combo: Combo
    variant: str
    seed: int
    jobs: list[JobRow]
    summary: dict[str, float]
    grows: list[float] = field(default_factory=list)
    shrinks: list[float] = field(default_factory=list)
    utilization: list[tuple[float, float]] = field(default_factory=list)
    last_submit: float = 0.0
    decisions: dict[str, int] = field(default_factory=dict)  # KoalaPolicy.counts

    def malleable(self) -> list[JobRow]:
        return [j for j in self.jobs if j.malleable]


def run_one(combo: Combo, variant: Variant, seed: int) -> Run:
    """Simulate one combo under one variant with one seed."""
    jobs = variant.workload(combo.workload, seed)
    policy = KoalaPolicy.named(combo.approach, combo.policy, variant.grow_threshold)
    result = simulate(jobs, DAS3, policy, variant.config(seed))
    summary = summarize(result.records, result.operations, result.makespan, result.utilization)
    summary.update(result.background)
    return Run(combo, variant.name, seed, _rows(result), summary,
               [op.time for op in result.operations if op.kind == "grow"],
               [op.time for op in result.operations if op.kind == "shrink"],
               utilization_series(result.timelines, sum(c.nodes for c in DAS3)),
               max(j.submit_time for j in jobs), dict(policy.counts))


def _rows(result: SimResult) -> list[JobRow]:
    done = [r for r in result.records if r.start is not None and r.end is not None]
    shared = _shared(done)
    return [JobRow(r.spec.app, r.spec.kind is JobKind.MALLEABLE, r.avg_size, r.max_size,
                   r.execution, r.response, r.wait, r.spec.id in shared) for r in done]


def _shared(records: Sequence[JobRecord]) -> set[str]:
    """Ids of malleable jobs that overlapped another malleable job on their cluster."""
    by_cluster: dict[str, list[tuple[float, float, str]]] = {}
    for r in records:
        if r.spec.kind is JobKind.MALLEABLE and r.start is not None and r.end is not None:
            by_cluster.setdefault(r.cluster, []).append((r.start, r.end, r.spec.id))
    shared: set[str] = set()
    for spans in by_cluster.values():
        spans.sort()
        latest_end = -math.inf
        for i, (start, end, job_id) in enumerate(spans):
            after = spans[i + 1][0] if i + 1 < len(spans) else math.inf
            if start < latest_end or after < end:
                shared.add(job_id)
            latest_end = max(latest_end, end)
    return shared


Task = tuple[Combo, Variant, int]


def plan(seeds: Sequence[int], variants: Iterable[Variant], combos: Iterable[Combo] = COMBOS
         ) -> list[Task]:
    """Every (combo, variant, seed) to run, in a stable order."""
    combos = tuple(combos)
    return [(c, v, s) for v in variants for c in combos for s in seeds]


@dataclass
class Results:
    """All runs, looked up by combo and variant."""

    seeds: tuple[int, ...]
    runs: dict[tuple[str, str], list[Run]] = field(default_factory=dict)

    def add(self, run: Run) -> None:
        self.runs.setdefault((run.combo.key, run.variant), []).append(run)

    def of(self, combo: Combo, variant: str = "paper") -> list[Run]:
        return sorted(self.runs.get((combo.key, variant), []), key=lambda r: r.seed)

    def variants(self) -> list[str]:
        seen: list[str] = []
        for _, variant in self.runs:
            if variant not in seen:
                seen.append(variant)
        return seen


def run_all(tasks: Sequence[Task], seeds: Sequence[int],
            advance: Callable[[Task], None] | None = None, workers: int = 1,
            executor: Executor | None = None) -> Results:
    """Run every task through ``executor`` (default: ``workers`` local processes, one: in
    this process), calling ``advance`` after each; results are added in the order of
    ``tasks`` whatever the workers."""
    ex = executor if executor is not None else Local(workers)
    done = None if advance is None else (lambda i: advance(tasks[i]))
    results = Results(tuple(seeds))
    for run in ex.map(run_one, tasks, done):
        results.add(run)
    return results
