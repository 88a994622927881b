"""Desires up, processors down: one reallocation of the whole tree.

:class:`TreeScheduler` keeps each scheduler node's current allocation. At the start
of a level-2 quantum the caller names the highest level whose quantum expires
(``top``, from :meth:`QuantumPattern.top_expiring`) and passes the jobs' desires;
the scheduler then

1. aggregates desires by **Desire-Sum** from the jobs up to level ``top`` (a node
   reports the sum of its children's latest desires; levels above ``top`` are not
   asked, their quantum has not expired);
2. allocates from level ``top`` down with **DEQ** (or **EQUI**: equal shares among
   children that still have unfinished jobs): roots start from their budget when
   ``top`` is the root level, otherwise level-``top`` nodes keep what their parents
   gave them at their last expiry;
3. charges the **reallocation cost** (section 4.3): every processor a node or job
   gains costs ``cost_factor * L`` of processor time at every level it descends
   through, so a processor moved between two jobs of one leaf costs ``CF*L``, one
   moved by a level-``k`` node costs ``(k-1)*CF*L``. A node's cost is shared by the
   jobs under it in proportion to what they gained; a job pays it out of its new
   allocation before it can use it (the engine does that).

Optional ``caps`` bound what a node can hold (a real site has so many nodes): a
node never reports a desire above its cap. ``budget`` and ``cost_factor`` may be
given per root (one tree of a forest each). Nothing here does I/O or reads a clock.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import cast

import numpy as np
from numpy.typing import NDArray

from malleable.policies.hierarchical.deq import deq_grouped, equi_desires
from malleable.policies.hierarchical.tree import QuantumPattern, TreeLayout

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]
BoolArray = NDArray[np.bool_]


class Rule(enum.Enum):
    """How a node splits its processors among its children."""

    DEQ = "deq"
    """Dynamic equipartitioning over the children's desires (Algorithm 1)."""
    EQUI = "equi"
    """Equal split among the children that still have unfinished jobs."""


@dataclass(frozen=True)
class JobsInput:
    """The jobs as the scheduler sees them at a reallocation (one entry per job slot)."""

    leaf: IntArray
    desire: FloatArray
    active: BoolArray
    previous: FloatArray
    cap: FloatArray | None = None


@dataclass(frozen=True)
class Reallocation:
    """What one reallocation decided."""

    top: int
    jobs: FloatArray
    """New allocation of every job slot (0 for inactive ones)."""
    charge: FloatArray
    """Reallocation cost each job pays, in processor-time units of ``L``."""
    desires: dict[int, FloatArray]
    """Desire reported by each node, per level ``2..top``."""
    nodes: dict[int, FloatArray]
    """Allocation of each node, per level ``2..K``, after this reallocation."""
    moved: float
    """Processors gained, summed over every node and job below ``top``."""


@dataclass
class TreeScheduler:
    """The tree's allocation state and the rule that updates it."""

    layout: TreeLayout
    quanta: QuantumPattern
    budget: float | FloatArray
    rule: Rule = Rule.DEQ
    integral: bool = False
    cost_factor: float | FloatArray = 0.0
    caps: Mapping[int, FloatArray] = field(default_factory=dict)
    alloc: dict[int, FloatArray] = field(init=False)
    _cost: FloatArray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if self.quanta.levels != self.layout.levels:
            raise ValueError(f"the quantum pattern has {self.quanta.levels} levels, the tree "
                             f"{self.layout.levels}")
        cost = np.broadcast_to(np.asarray(self.cost_factor, dtype=np.float64),
                               (self.layout.roots,))
        if np.any(cost < 0):
            raise ValueError(f"cost factor {self.cost_factor} must be >= 0")
        self._cost = cost[self.layout.root_of_leaves()]  # per level-2 node
        self.alloc = {k: np.zeros(self.layout.count(k))
                      for k in range(2, self.layout.levels + 1)}

    @property
    def levels(self) -> int:
        return self.layout.levels

    def reallocate(self, top: int, jobs: JobsInput) -> Reallocation:
        """Aggregate desires up to ``top``, allocate down from it, charge the moves."""
        if not 2 <= top <= self.levels:
            raise ValueError(f"top level {top} outside 2..{self.levels}")
        desires, counts = self._aggregate(top, jobs)
        old = {k: self.alloc[k].copy() for k in range(2, top)}
        if top == self.levels:
            self.alloc[top] = np.broadcast_to(np.asarray(self.budget, dtype=np.float64),
                                              (self.layout.roots,)).copy()
        for level in range(top, 2, -1):
            child = level - 1
            want = self._wants(desires[child], counts[child], self.caps.get(child))
            self.alloc[child] = deq_grouped(want, self.layout.parent(child), self.alloc[level],
                                            self.integral)
        new_jobs = self._allocate_jobs(jobs)
        charge, moved = self._charges(top, jobs, new_jobs, old)
        return Reallocation(top, new_jobs, charge, desires,
                            {k: v.copy() for k, v in self.alloc.items()}, moved)

    # ----------------------------------------------------------------- steps

    def _aggregate(self, top: int, jobs: JobsInput) -> tuple[dict[int, FloatArray],
                                                             dict[int, FloatArray]]:
        """Desire-Sum (and the count of unfinished jobs) for levels 2..top."""
        act = jobs.active
        leaf = jobs.leaf[act]
        desire = self._job_desires(jobs)[act]
        d = _sum(leaf, desire, self.layout.count(2))
        c = np.bincount(leaf, minlength=self.layout.count(2)).astype(np.float64)
        desires = {2: self._capped(d, 2)}
        counts = {2: c}
        for level in range(3, top + 1):
            parent = self.layout.parent(level - 1)
            n = self.layout.count(level)
            desires[level] = self._capped(_sum(parent, desires[level - 1], n), level)
            counts[level] = _sum(parent, counts[level - 1], n)
        return desires, counts

    def _capped(self, desire: FloatArray, level: int) -> FloatArray:
        cap = self.caps.get(level)
        return desire if cap is None else np.minimum(desire, cap)

    def _job_desires(self, jobs: JobsInput) -> FloatArray:
        return jobs.desire if jobs.cap is None else np.minimum(jobs.desire, jobs.cap)

    def _wants(self, desire: FloatArray, count: FloatArray, cap: FloatArray | None) -> FloatArray:
        if self.rule is Rule.EQUI:
            return equi_desires(count > 0, cap)
        return desire

    def _allocate_jobs(self, jobs: JobsInput) -> FloatArray:
        new = np.zeros(len(jobs.leaf))
        act = np.flatnonzero(jobs.active)
        if act.size == 0:
            return new
        if self.rule is Rule.EQUI:
            cap = None if jobs.cap is None else jobs.cap[act]
            want = equi_desires(np.ones(act.size, dtype=bool), cap)
        else:
            want = self._job_desires(jobs)[act]
        new[act] = deq_grouped(want, jobs.leaf[act], self.alloc[2], self.integral)
        return new

    def _charges(self, top: int, jobs: JobsInput, new_jobs: FloatArray,
                 old: dict[int, FloatArray]) -> tuple[FloatArray, float]:
        """Per-job reallocation cost (processor time, units of L) and processors moved."""
        gain_jobs = np.maximum(0.0, new_jobs - jobs.previous)
        gains = {k: np.maximum(0.0, self.alloc[k] - old[k]) for k in range(2, top)}
        moved = float(gain_jobs.sum() + sum(g.sum() for g in gains.values()))
        if moved == 0 or not self._cost.any():
            return np.zeros(len(new_jobs)), moved
        below = {2: _sum(jobs.leaf, gain_jobs, self.layout.count(2))}
        for level in range(3, top):
            below[level] = _sum(self.layout.parent(level - 1), below[level - 1],
                                self.layout.count(level))
        factor = np.zeros(self.layout.count(top))  # nodes at ``top`` gain nothing
        for level in range(top - 1, 1, -1):
            per_unit = np.divide(gains[level], below[level], out=np.zeros_like(gains[level]),
                                 where=below[level] > 0)
            factor = per_unit + factor[self.layout.parent(level)]
        per_job = 1.0 + factor[jobs.leaf] if top > 2 else np.ones(len(new_jobs))
        return self._cost[jobs.leaf] * gain_jobs * per_job, moved


def _sum(groups: IntArray, weights: FloatArray, n: int) -> FloatArray:
    """Per-group sums of ``weights`` (``n`` groups)."""
    return cast(FloatArray, np.bincount(groups, weights, n))
