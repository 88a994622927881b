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
   estimator (A-Control or A-Greedy) for its next desire.

The engine holds no policy: the tree, DEQ/EQUI and the estimators live in
:mod:`malleable.policies.hierarchical` and are called here. Many independent runs
can go in one call (a forest of trees, their jobs side by side): each step then
advances all of them, which is what makes the experiment sweep fast.
"""

from __future__ import annotations

import enum
import math
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
from malleable.policies.hierarchical.tree import QuantumPattern, TreeLayout
from malleable.sim.quantum.jobs import JobSet

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]

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
class EngineConfig:
    """The platform and the scheduler's knobs."""

    algorithm: Algorithm = Algorithm.ACDS
    processors: float = 256.0
    quantum_factor: int = 1
    cost_factor: float = 0.0
    integral: bool = False
    greedy: AGreedyParams = field(default_factory=AGreedyParams)
    max_quanta: int = 50_000_000


@dataclass(frozen=True)
class Outcome:
    """Per-job results of one simulation (arrays in job order)."""

    completion: FloatArray
    held: FloatArray
    """Processor time allotted while the job ran (``a`` times the time it ran in each quantum)."""
    allotted: FloatArray
    """Sum of the job's allocation over the quanta it ran in (whole quanta)."""
    satisfied: IntArray
    """Quanta in which the job got at least its desire."""
    quanta: int
    """Level-2 quanta simulated."""
    moved: float
    """Processors moved, summed over the whole run (every level)."""


@dataclass
class _State:
    seg: IntArray
    rem: FloatArray
    end: IntArray
    desire: FloatArray
    alloc: FloatArray
    debt: FloatArray
    completion: FloatArray
    held: FloatArray
    allotted: FloatArray
    satisfied: IntArray

    @classmethod
    def start(cls, jobs: JobSet) -> _State:
        n = len(jobs)
        seg = jobs.start[:-1].copy()
        return cls(seg, jobs.spans[seg].copy() if n else np.zeros(0), jobs.start[1:].copy(),
                   np.full(n, INITIAL_DESIRE), np.zeros(n), np.zeros(n), np.full(n, np.nan),
                   np.zeros(n), np.zeros(n), np.zeros(n, dtype=np.int64))


def simulate(jobs: JobSet, leaf: IntArray, layout: TreeLayout,
             config: EngineConfig = EngineConfig()) -> Outcome:
    """Run ``jobs`` (job ``i`` at level-2 node ``leaf[i]``) to completion on ``layout``."""
    if len(leaf) != len(jobs):
        raise ValueError(f"{len(leaf)} leaves for {len(jobs)} jobs")
    quanta = QuantumPattern.geometric(layout.levels, config.quantum_factor)
    scheduler = TreeScheduler(layout, quanta, config.processors, config.algorithm.rule,
                              config.integral, config.cost_factor)
    state = _State.start(jobs)
    order = np.argsort(jobs.release, kind="stable")
    released = jobs.release[order]
    ptr, step, moved = 0, 0, 0.0
    active = np.zeros(0, dtype=np.int64)
    while ptr < len(order) or active.size:
        if active.size == 0:  # idle: jump to the quantum where the next job is released
            step = _skip_idle(scheduler, quanta, step, math.ceil(released[ptr] - _EPS))
        upto = int(np.searchsorted(released, step + _EPS, side="right"))
        if upto > ptr:
            active = np.concatenate([active, order[ptr:upto]])
            ptr = upto
        top = quanta.top_expiring(step)
        moved += _quantum(jobs, state, scheduler, leaf, active, top, step, config)
        active = active[np.isnan(state.completion[active])]
        step += 1
        if step > config.max_quanta:
            raise RuntimeError(f"simulation did not finish within {config.max_quanta} quanta")
    return Outcome(state.completion, state.held, state.allotted, state.satisfied, step, moved)


def _skip_idle(scheduler: TreeScheduler, quanta: QuantumPattern, step: int, target: int
               ) -> int:
    """Jump from ``step`` to ``target`` with no job in the system.

    The quanta that end in between see no desire at all: one empty reallocation from
    the highest level among them leaves the same state as stepping through them.
    """
    if target <= step:
        return step
    top = quanta.top_between(step - 1, target - 1)
    empty = np.zeros(0)
    scheduler.reallocate(top, JobsInput(np.zeros(0, dtype=np.int64), empty,
                                        np.zeros(0, dtype=bool), empty))
    return target


def _quantum(jobs: JobSet, state: _State, scheduler: TreeScheduler, leaf: IntArray,
             active: IntArray, top: int, step: int, config: EngineConfig) -> float:
    """One level-2 quantum for the ``active`` jobs; returns the processors moved."""
    desire = state.desire[active]
    realloc = scheduler.reallocate(top, JobsInput(leaf[active], desire,
                                                  np.ones(active.size, dtype=bool),
                                                  state.alloc[active]))
    a = realloc.jobs
    state.alloc[active] = a
    debt = state.debt[active] + realloc.charge
    pay = np.minimum(debt, a)
    state.debt[active] = debt - pay
    work, span, ran = _run(jobs, state, active, a - pay)
    state.held[active] += a * ran
    state.allotted[active] += a
    state.satisfied[active] += a >= desire * (1 - 1e-9)
    estimator = config.algorithm.estimator
    if estimator is Estimator.AC:
        state.desire[active] = a_control(work, span, desire)
    elif estimator is Estimator.AG:
        state.desire[active] = a_greedy(desire, a, work, ran, config.greedy)
    done = state.seg[active] >= state.end[active]
    state.completion[active[done]] = step + ran[done]
    return realloc.moved


def _run(jobs: JobSet, state: _State, active: IntArray, usable: FloatArray
         ) -> tuple[FloatArray, FloatArray, FloatArray]:
    """Advance the active jobs by one quantum; work done, span covered, time run."""
    n = active.size
    left = np.ones(n)
    work = np.zeros(n)
    span = np.zeros(n)
    cur = np.arange(n)
    while cur.size:
        j = active[cur]
        s = state.seg[j]
        h = jobs.heights[s]
        rate = np.minimum(usable[cur], h)
        srate = rate / h
        rem = state.rem[j]
        need = np.divide(rem, srate, out=np.full(cur.size, np.inf), where=srate > 0)
        tl = left[cur]
        dt = np.minimum(tl, need)
        work[cur] += rate * dt
        span[cur] += srate * dt
        left[cur] = tl - dt
        crossed = need <= tl
        state.rem[j] = np.where(crossed, 0.0, rem - srate * dt)
        jc = j[crossed]
        state.seg[jc] += 1
        going = state.seg[jc] < state.end[jc]
        nxt = jc[going]
        state.rem[nxt] = jobs.spans[state.seg[nxt]]
        cur = cur[crossed][going]
        cur = cur[left[cur] > _EPS]
    return work, span, 1.0 - left
