"""The sweep behind Figs. 4 to 8 of the AC-DS paper: which runs, in which batches.

Every run is identified by a :data:`Cell` ``(K, algorithm, QF, CF, n)`` and has
``reps`` repetitions; repetition ``r`` of ``(K, n)`` is the same scenario (tree and
jobs) for every algorithm, quantum factor and cost factor, and the same jobs for
every K (only the tree changes). Runs that share ``(K, QF)`` are simulated together
in chunks (one clock, forests of trees), which is what makes the sweep fast; chunks
are independent and may run in worker processes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from malleable.experiments.executor import Executor, Local
from malleable.sim.quantum.engine import Algorithm, Platform
from malleable.sim.quantum.jobs import DowneyParams
from malleable.sim.quantum.scenario import RunMetrics, Scenario, run_many, scenario

#: (levels K, algorithm, quantum factor QF, cost factor CF, number of jobs n)
Cell = tuple[int, Algorithm, int, float, int]

FEEDBACK = (Algorithm.ACDS, Algorithm.AGDS)


@dataclass(frozen=True)
class Settings:
    """What to sweep. The defaults are the paper's (section 4.2 and Figs. 4 to 8)."""

    levels: tuple[int, ...] = (2, 3, 4, 5)
    jobs: tuple[int, ...] = tuple(range(20, 501, 20))
    reps: int = 10
    quantum_factors: tuple[int, ...] = (1, 2, 3, 4, 5, 6)
    fig7_costs: tuple[float, ...] = (0.0, 0.1)
    fig8_costs: tuple[float, ...] = (0.0, 0.1, 0.2, 0.5)
    fig8_jobs: int = 300
    seed: int = 1
    integral: bool = False
    params: DowneyParams = field(default_factory=DowneyParams)
    chunk_jobs: int = 70_000

    @classmethod
    def quick(cls, **changes: object) -> Settings:
        """A tiny sweep that exercises every figure in seconds."""
        base = cls(levels=(2, 3), jobs=(20, 40), reps=2, quantum_factors=(1, 2),
                   fig7_costs=(0.0, 0.1), fig8_costs=(0.0, 0.5), fig8_jobs=40,
                   params=DowneyParams(work_scale=1e-4))
        return replace(base, **changes)  # type: ignore[arg-type]

    @property
    def deepest(self) -> int:
        """The K of Figs. 7 and 8 (5 in the paper)."""
        return max(self.levels)


@dataclass(frozen=True)
class Chunk:
    """Runs simulated together: one depth and quantum factor, any algorithms and costs.

    ``runs`` holds ``(algorithm, CF, n, repetition)``; runs of the same ``(n, repetition)``
    share one scenario.
    """

    levels: int
    quantum_factor: int
    runs: tuple[tuple[Algorithm, float, int, int], ...]

    @property
    def jobs(self) -> int:
        """Jobs simulated (every run counts its own)."""
        return sum(n for _, _, n, _ in self.runs)


def cells(settings: Settings) -> list[Cell]:
    """Every cell the five figures need, without duplicates, in a stable order."""
    wanted: dict[Cell, None] = {}
    for k in settings.levels:
        for alg in Algorithm:
            for n in settings.jobs:
                wanted[(k, alg, 1, 0.0, n)] = None
    k = settings.deepest
    for cf in settings.fig7_costs:
        for qf in settings.quantum_factors:
            for alg in (Algorithm.ACDS, Algorithm.EQUI):
                for n in settings.jobs:
                    wanted[(k, alg, qf, cf, n)] = None
    for cf in settings.fig8_costs:
        for qf in settings.quantum_factors:
            for alg in (Algorithm.ACDS, Algorithm.EQUI):
                wanted[(k, alg, qf, cf, settings.fig8_jobs)] = None
    return list(wanted)


def chunks(settings: Settings) -> list[Chunk]:
    """Cells grouped by ``(K, QF)``, cut by scenario into about ``chunk_jobs`` distinct jobs."""
    groups: dict[tuple[int, int], dict[tuple[int, int], list[tuple[Algorithm, float]]]] = {}
    for k, alg, qf, cf, n in cells(settings):
        by_scenario = groups.setdefault((k, qf), {})
        for rep in range(settings.reps):
            by_scenario.setdefault((n, rep), []).append((alg, cf))
    out: list[Chunk] = []
    for (k, qf), by_scenario in groups.items():
        for part in _cut(sorted(by_scenario), settings.chunk_jobs):
            runs = tuple((alg, cf, n, rep) for n, rep in part for alg, cf in by_scenario[(n, rep)])
            out.append(Chunk(k, qf, runs))
    return out


def _cut(scenarios: list[tuple[int, int]], limit: int) -> Iterator[list[tuple[int, int]]]:
    part: list[tuple[int, int]] = []
    size = 0
    for sc in scenarios:
        if part and size + sc[0] > limit:
            yield part
            part, size = [], 0
        part.append(sc)
        size += sc[0]
    if part:
        yield part


def run_chunk(chunk: Chunk, settings: Settings) -> list[tuple[Cell, int, RunMetrics]]:
    """Simulate one chunk; each run's cell, repetition and metrics."""
    made: dict[tuple[int, int], Scenario] = {}
    for _, _, n, rep in chunk.runs:
        if (n, rep) not in made:
            made[(n, rep)] = scenario(chunk.levels, n, (settings.seed, n, rep), settings.params)
    platform = Platform(float(settings.params.processors), chunk.quantum_factor,
                        settings.integral)
    metrics = run_many([(made[(n, rep)], alg, cf) for alg, cf, n, rep in chunk.runs], platform)
    return [((chunk.levels, alg, chunk.quantum_factor, cf, n), rep, m)
            for (alg, cf, n, rep), m in zip(chunk.runs, metrics, strict=True)]


@dataclass
class Results:
    """Metrics of every run, by cell."""

    runs: dict[Cell, dict[int, RunMetrics]] = field(default_factory=dict)

    def add(self, cell: Cell, rep: int, metrics: RunMetrics) -> None:
        self.runs.setdefault(cell, {})[rep] = metrics

    def of(self, cell: Cell) -> list[RunMetrics]:
        """The runs of ``cell``, by repetition."""
        reps = self.runs[cell]
        return [reps[r] for r in sorted(reps)]

    def mean(self, metric: str, k: int, alg: Algorithm, qf: int, cf: float,
             jobs: Sequence[int]) -> np.ndarray:
        """Mean of ``metric`` over the repetitions, for each number of jobs."""
        return np.array([np.mean([getattr(m, metric) for m in self.of((k, alg, qf, cf, n))])
                         for n in jobs])

    def ratio(self, num: Algorithm, den: Algorithm, k: int, qf: int, cf: float,
              jobs: Sequence[int]) -> np.ndarray:
        """Mean makespan of ``num`` over mean makespan of ``den``, for each number of jobs."""
        ratio: np.ndarray = (self.mean("makespan", k, num, qf, cf, jobs)
                             / self.mean("makespan", k, den, qf, cf, jobs))
        return ratio


def run_all(settings: Settings, on_chunk: Callable[[Chunk], None] = lambda c: None,
            workers: int = 1, executor: Executor | None = None) -> Results:
    """Run every chunk through ``executor`` (default: ``workers`` local processes) and
    collect the results."""
    ex = executor if executor is not None else Local(workers)
    results = Results()
    todo = chunks(settings)
    outputs = ex.map(run_chunk, [(chunk, settings) for chunk in todo],
                     lambda i: on_chunk(todo[i]))
    for output in outputs:
        for cell, rep, m in output:
            results.add(cell, rep, m)
    return results
