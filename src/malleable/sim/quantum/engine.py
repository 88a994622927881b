"""A quantum-stepped simulator for the AC-DS experiments (section 4).

Time advances by the level-2 quantum ``L`` (= 1 here; every time is in units of
``L``). At the start of each quantum the engine

1. admits the jobs released since the last quantum (a new job desires 1);
2. asks the :class:`~malleable.policies.hierarchical.scheduler.TreeScheduler` to
   reallocate, from the highest level whose quantum expires now;
3. lets every job pay its reallocation cost out of its allocation, then run for
   one quantum at rate ``min(allocation, parallelism)``: a job advances along its
   span at ``min(a, h) / h``, through its piecewise-constant parallelism segments;
4. feeds the work done and the span covered (``w(q)``, ``l(q)``) to the job's
   estimator (A-Control or A-Greedy) for its next desire. A-Greedy counts processor
   time lost to reallocation as allotted but unused, as Agrawal et al. count waste.

The engine holds no policy: the tree, DEQ/EQUI and the estimators live in
:mod:`malleable.policies.hierarchical` and are called here. Many independent runs
go through one call (:func:`simulate_many`): runs under DEQ (AC-DS, AG-DS) share one
forest and scheduler, runs under EQUI-EQUI another, all advance on one clock, and
runs of the same scenario share its job segments. That is what makes the sweep fast.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from malleable.policies.hierarchical.estimators import (
    INITIAL_DESIRE,
    AGreedyParams,
    Estimator,
    a_control,
    a_greedy,
)
from malleable.policies.hierarchical.scheduler import JobsInput, Rule, TreeScheduler
from malleable.policies.hierarchical.tree import QuantumPattern, TreeLayout, forest, leaf_offsets
from malleable.sim.quantum.jobs import JobSet

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]
BoolArray = NDArray[np.bool_]

_EPS = 1e-12


class Algorithm(enum.Enum):
    """The three hierarchical schedulers of section 4."""

    ACDS = "AC-DS"
    AGDS = "AG-DS"
    EQUI = "EQUI-EQUI"

    @property
    def rule(self) -> Rule:
        return Rule.EQUI if self is Algorithm.EQUI else Rule.DEQ

    @property
    def estimator(self) -> Estimator | None:
        return {Algorithm.ACDS: Estimator.AC, Algorithm.AGDS: Estimator.AG}.get(self)


@dataclass(frozen=True)
class Platform:
    """What every run of one :func:`simulate_many` call shares."""

    processors: float = 256.0
    quantum_factor: int = 1
    integral: bool = False
    greedy: AGreedyParams = field(default_factory=AGreedyParams)
    max_quanta: int = 50_000_000


@dataclass(frozen=True)
class EngineConfig:
    """One run's algorithm and knobs (for :func:`simulate`)."""

    algorithm: Algorithm = Algorithm.ACDS
    processors: float = 256.0
    quantum_factor: int = 1
    cost_factor: float = 0.0
    integral: bool = False
    greedy: AGreedyParams = field(default_factory=AGreedyParams)
    max_quanta: int = 50_000_000

    @property
    def platform(self) -> Platform:
        return Platform(self.processors, self.quantum_factor, self.integral, self.greedy,
                        self.max_quanta)


@dataclass(frozen=True)
class RunSpec:
    """One run: jobs on a tree under an algorithm, with a reallocation cost factor."""

    jobs: JobSet
    leaf: IntArray
    tree: TreeLayout
    algorithm: Algorithm
    cost_factor: float = 0.0


@dataclass(frozen=True)
class Outcome:
    """Per-job results of one run (arrays in job order)."""

    completion: FloatArray
    held: FloatArray
    """Processor time allotted while the job ran (``a`` times the time it ran in each quantum)."""
    allotted: FloatArray
    """Sum of the job's allocation over the quanta it ran in (whole quanta)."""
    satisfied: IntArray
    """Quanta in which the job got at least its desire."""
    quanta: int
    """Level-2 quanta simulated (for the whole call)."""


_NONE, _AC, _AG = 0, 1, 2


@dataclass
class _Segments:
    """Every distinct job set's segments, end to end."""

    heights: FloatArray
    spans: FloatArray


@dataclass
class _Group:
    """Runs that share one scheduler (same rule): their jobs and state."""

    scheduler: TreeScheduler
    leaf: IntArray
    release: FloatArray
    estimator: IntArray
    seg: IntArray
    end: IntArray
    rem: FloatArray
    desire: FloatArray = field(init=False)
    alloc: FloatArray = field(init=False)
    debt: FloatArray = field(init=False)
    completion: FloatArray = field(init=False)
    held: FloatArray = field(init=False)
    allotted: FloatArray = field(init=False)
    satisfied: IntArray = field(init=False)
    order: IntArray = field(init=False)
    released: FloatArray = field(init=False)
    ptr: int = 0
    active: IntArray = field(init=False)

    def __post_init__(self) -> None:
        n = len(self.leaf)
        self.desire = np.full(n, INITIAL_DESIRE)
        self.alloc, self.debt = np.zeros(n), np.zeros(n)
        self.completion = np.full(n, np.nan)
        self.held, self.allotted = np.zeros(n), np.zeros(n)
        self.satisfied = np.zeros(n, dtype=np.int64)
        self.order = np.argsort(self.release, kind="stable")
        self.released = self.release[self.order]
        self.active = np.zeros(0, dtype=np.int64)

    @property
    def next_release(self) -> float:
        return float(self.released[self.ptr]) if self.ptr < len(self.order) else math.inf

    @property
    def busy(self) -> bool:
        return self.ptr < len(self.order) or self.active.size > 0

    def admit(self, step: int) -> None:
        if self.ptr >= len(self.order) or self.released[self.ptr] > step + _EPS:
            return
        upto = int(np.searchsorted(self.released, step + _EPS, side="right"))
        if upto > self.ptr:
            self.active = np.concatenate([self.active, self.order[self.ptr:upto]])
            self.ptr = upto


def simulate(jobs: JobSet, leaf: IntArray, layout: TreeLayout,
             config: EngineConfig = EngineConfig()) -> Outcome:
    """Run ``jobs`` (job ``i`` at level-2 node ``leaf[i]``) to completion on ``layout``."""
    run = RunSpec(jobs, leaf, layout, config.algorithm, config.cost_factor)
    return simulate_many([run], config.platform)[0]


def simulate_many(runs: Sequence[RunSpec], platform: Platform = Platform()) -> list[Outcome]:
    """Run independent ``runs`` (trees of one depth) together; one outcome per run."""
    if not runs:
        return []
    for run in runs:
        if len(run.leaf) != len(run.jobs):
            raise ValueError(f"{len(run.leaf)} leaves for {len(run.jobs)} jobs")
    segments, firsts = _segments(runs)
    quanta = QuantumPattern.geometric(runs[0].tree.levels, platform.quantum_factor)
    groups = {rule: _group([i for i, r in enumerate(runs) if r.algorithm.rule is rule], runs,
                           firsts, quanta, platform) for rule in Rule}
    live = [g for g in groups.values() if g is not None]
    steps = _loop(live, segments, quanta, platform)
    return _outcomes(runs, groups, steps)


def _segments(runs: Sequence[RunSpec]) -> tuple[_Segments, dict[int, int]]:
    """Concatenate each distinct job set once; the offset of each, by ``id``."""
    firsts: dict[int, int] = {}
    heights: list[FloatArray] = []
    spans: list[FloatArray] = []
    size = 0
    for run in runs:
        if id(run.jobs) not in firsts:
            firsts[id(run.jobs)] = size
            heights.append(run.jobs.heights)
            spans.append(run.jobs.spans)
            size += len(run.jobs.heights)
    return _Segments(np.concatenate(heights), np.concatenate(spans)), firsts


def _group(members: list[int], runs: Sequence[RunSpec], firsts: dict[int, int],
           quanta: QuantumPattern, platform: Platform) -> _Group | None:
    if not members:
        return None
    chosen = [runs[i] for i in members]
    trees = [r.tree for r in chosen]
    offsets = leaf_offsets(trees)
    layout = forest(trees)
    cost = np.array([r.cost_factor for r in chosen])
    rule = chosen[0].algorithm.rule
    scheduler = TreeScheduler(layout, quanta, platform.processors, rule, platform.integral, cost)
    code = {Estimator.AC: _AC, Estimator.AG: _AG, None: _NONE}
    seg = np.concatenate([r.jobs.start[:-1] + firsts[id(r.jobs)] for r in chosen])
    return _Group(
        scheduler,
        np.concatenate([r.leaf + off for r, off in zip(chosen, offsets, strict=True)]),
        np.concatenate([r.jobs.release for r in chosen]),
        np.concatenate([np.full(len(r.jobs), code[r.algorithm.estimator]) for r in chosen]),
        seg, np.concatenate([r.jobs.start[1:] + firsts[id(r.jobs)] for r in chosen]),
        np.zeros(len(seg)))


def _outcomes(runs: Sequence[RunSpec], groups: dict[Rule, _Group | None], steps: int
              ) -> list[Outcome]:
    taken = {rule: 0 for rule in Rule}
    out = []
    for run in runs:
        rule = run.algorithm.rule
        g = groups[rule]
        if g is None:  # cannot happen: every run's rule has a group
            raise RuntimeError(f"no group for rule {rule}")
        sl = slice(taken[rule], taken[rule] + len(run.jobs))
        taken[rule] = sl.stop
        out.append(Outcome(g.completion[sl], g.held[sl], g.allotted[sl], g.satisfied[sl], steps))
    return out


def _loop(groups: list[_Group], segments: _Segments, quanta: QuantumPattern,
          platform: Platform) -> int:
    for g in groups:
        g.rem = segments.spans[g.seg].copy()
    step = 0
    while any(g.busy for g in groups):
        if not any(g.active.size for g in groups):  # idle: jump to the next release
            target = math.ceil(min(g.next_release for g in groups) - _EPS)
            for g in groups:
                _skip_idle(g.scheduler, quanta, step, target)
            step = max(step, target)
        top = quanta.top_expiring(step)
        for g in groups:
            g.admit(step)
            _quantum(g, segments, top, step, platform)
        step += 1
        if step > platform.max_quanta:
            raise RuntimeError(f"simulation did not finish within {platform.max_quanta} quanta")
    return step


def _skip_idle(scheduler: TreeScheduler, quanta: QuantumPattern, step: int, target: int
               ) -> None:
    """Jump from ``step`` to ``target`` with no job in the system.

    The quanta that end in between see no desire at all: one empty reallocation from
    the highest level among them leaves the same state as stepping through them.
    """
    if target <= step:
        return
    top = quanta.top_between(step - 1, target - 1)
    empty = np.zeros(0)
    scheduler.reallocate(top, JobsInput(np.zeros(0, dtype=np.int64), empty,
                                        np.zeros(0, dtype=bool), empty))


def _quantum(g: _Group, segments: _Segments, top: int, step: int, platform: Platform) -> None:
    """One level-2 quantum for the group's active jobs."""
    active = g.active
    desire = g.desire[active]
    realloc = g.scheduler.reallocate(top, JobsInput(g.leaf[active], desire,
                                                    np.ones(active.size, dtype=bool),
                                                    g.alloc[active]))
    if active.size == 0:
        return
    a = realloc.jobs
    g.alloc[active] = a
    debt = g.debt[active] + realloc.charge
    pay = np.minimum(debt, a)
    g.debt[active] = debt - pay
    work, span, ran = _run(g, segments, active, a - pay)
    g.held[active] += a * ran
    g.allotted[active] += a
    g.satisfied[active] += a >= desire * (1 - 1e-9)
    g.desire[active] = _estimate(g.estimator[active], desire, a, work, span, ran, platform)
    done = g.seg[active] >= g.end[active]
    g.completion[active[done]] = step + ran[done]
    g.active = active[~done]


def _estimate(code: IntArray, desire: FloatArray, a: FloatArray, work: FloatArray,
              span: FloatArray, ran: FloatArray, platform: Platform) -> FloatArray:
    nxt = desire.copy()
    ac = code == _AC
    if ac.any():
        nxt[ac] = a_control(work[ac], span[ac], desire[ac])
    ag = code == _AG
    if ag.any():
        nxt[ag] = a_greedy(desire[ag], a[ag], work[ag], ran[ag], platform.greedy)
    return nxt


def _run(g: _Group, segments: _Segments, active: IntArray, usable: FloatArray
         ) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Advance the active jobs by one quantum; work done, span covered, time run."""
    n = active.size
    left = np.ones(n)
    work = np.zeros(n)
    span = np.zeros(n)
    cur = np.arange(n)
    while cur.size:
        j = active[cur]
        s = g.seg[j]
        h = segments.heights[s]
        rate = np.minimum(usable[cur], h)
        srate = rate / h
        rem = g.rem[j]
        need = np.divide(rem, srate, out=np.full(cur.size, np.inf), where=srate > 0)
        tl = left[cur]
        dt = np.minimum(tl, need)
        work[cur] += rate * dt
        span[cur] += srate * dt
        left[cur] = tl - dt
        crossed = need <= tl
        g.rem[j] = np.where(crossed, 0.0, rem - srate * dt)
        jc = j[crossed]
        g.seg[jc] += 1
        going = g.seg[jc] < g.end[jc]
        nxt = jc[going]
        g.rem[nxt] = segments.spans[g.seg[nxt]]
        cur = cur[crossed][going]
        cur = cur[left[cur] > _EPS]
    return work, span, 1.0 - left
