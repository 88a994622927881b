"""Dynamic equipartitioning (DEQ), Algorithm 1 of the AC-DS paper, and EQUI.

DEQ gives each child of a node what it desires if that is no more than an equal
share, and recurses on the others with what is left; when no remaining child can
be satisfied, each gets the last equal share. The result is max-min fair (water
filling): every child gets ``min(desire, s)`` for one level ``s``, and processors
are left unallocated when every desire is met.

Two forms live here and give the same answers (tests check it):

* :func:`deq` and :func:`deq_integral`: one node at a time, written as the paper's
  pseudocode (the reference, and what the real-site policy uses for small trees);
* :func:`deq_grouped`: many nodes at once over numpy arrays, one child per entry
  and ``groups`` naming each child's parent, for the quantum simulator.

EQUI (equal split among children that still have unfinished jobs) is DEQ with an
infinite desire for every such child and zero for the others (:func:`equi_desires`).

The integral mode is for real clusters: desires are rounded up to whole processors,
budgets are whole, and the last equal share is split as ``budget // n`` with the
remainder going, one each, to the children with the largest desires (ties by
position). No child ever gets more than its (rounded) desire.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

FloatArray = NDArray[np.float64]
IntArray = NDArray[np.int64]

#: Relative slack when comparing a desire with a share (float noise in sums).
TOLERANCE = 1e-9


def _check(desires: Sequence[float], budget: float) -> None:
    if not budget >= 0 or math.isnan(budget):
        raise ValueError(f"budget {budget} must be a non-negative number")
    for d in desires:
        if not d >= 0:
            raise ValueError(f"desire {d} must be a non-negative number")


def deq(desires: Sequence[float], budget: float) -> list[float]:
    """Algorithm 1, fractional: the allocation of ``budget`` among children with ``desires``."""
    _check(desires, budget)
    alloc = [0.0] * len(desires)
    remaining = list(range(len(desires)))
    left = float(budget)
    while remaining:  # lines 1-2: stop when every child is served
        share = left / len(remaining)
        satisfied = [i for i in remaining if desires[i] <= share * (1 + TOLERANCE)]  # line 3
        if not satisfied:  # lines 4-7: nobody fits, everyone gets the equal share
            for i in remaining:
                alloc[i] = share
            return alloc
        for i in satisfied:  # lines 9-10
            alloc[i] = float(desires[i])
        left = max(0.0, left - sum(desires[i] for i in satisfied))  # line 11, the recursion
        served = set(satisfied)
        remaining = [i for i in remaining if i not in served]
    return alloc


def whole(desire: float) -> float:
    """A fractional desire in whole processors (rounded up, float noise forgiven)."""
    if math.isinf(desire):
        return desire
    return float(math.ceil(desire - TOLERANCE))


def deq_integral(desires: Sequence[float], budget: int) -> list[int]:
    """Algorithm 1 in whole processors (see the module docstring for the remainder rule)."""
    _check(desires, budget)
    wants = [whole(d) for d in desires]
    alloc = [0] * len(desires)
    remaining = list(range(len(desires)))
    left = int(budget)
    while remaining:
        n = len(remaining)
        satisfied = [i for i in remaining if wants[i] * n <= left]
        if not satisfied:
            share, extra = divmod(left, n)
            ranked = sorted(remaining, key=lambda i: (-wants[i], i))
            for rank, i in enumerate(ranked):
                alloc[i] = share + (1 if rank < extra else 0)
            return alloc
        for i in satisfied:
            alloc[i] = int(wants[i])
        left -= sum(alloc[i] for i in satisfied)
        served = set(satisfied)
        remaining = [i for i in remaining if i not in served]
    return alloc


def equi_desires(active: NDArray[np.bool_], caps: FloatArray | None = None) -> FloatArray:
    """The desires that make DEQ behave as EQUI: infinite (or the cap) where active, else 0."""
    top = np.full(active.shape, np.inf) if caps is None else caps.astype(np.float64)
    return np.where(active, top, 0.0)


def deq_grouped(desires: FloatArray, groups: IntArray, budgets: FloatArray,
                integral: bool = False) -> FloatArray:
    """DEQ for many nodes at once.

    ``desires[i]`` is child ``i``'s desire and ``groups[i]`` the index of its parent in
    ``budgets``. Returns each child's allocation. Parents whose children's desires all
    fit are served at once; for the others each pass of the loop is one level of
    Algorithm 1's recursion, done for all of them together.
    """
    n_groups = len(budgets)
    wants = np.asarray(desires, dtype=np.float64)
    if integral:
        wants = np.where(np.isinf(wants), wants, np.maximum(np.ceil(wants - TOLERANCE), 0.0))
    alloc = np.zeros(len(wants))
    left = np.asarray(budgets, dtype=np.float64).copy()
    total = np.bincount(groups, wants, n_groups)
    slack = 1.0 if integral else 1 + TOLERANCE
    fits_all = (total <= left * slack)[groups]
    alloc[fits_all] = wants[fits_all]
    idx = np.flatnonzero(~fits_all)
    g, w = groups[idx], wants[idx]
    count = np.bincount(g, minlength=n_groups).astype(np.float64)
    while idx.size:
        fits = w * count[g] <= left[g] if integral else w <= left[g] / count[g] * slack
        if not fits.any():
            break
        alloc[idx[fits]] = w[fits]
        left = np.maximum(0.0, left - np.bincount(g[fits], w[fits], n_groups))
        count -= np.bincount(g[fits], minlength=n_groups)
        keep = ~fits
        idx, g, w = idx[keep], g[keep], w[keep]
    if idx.size:
        alloc[idx] = (_integral_shares(idx, g, w, left, count) if integral
                      else left[g] / count[g])
    return alloc


def _integral_shares(idx: IntArray, g: IntArray, wants: FloatArray, left: FloatArray,
                     count: FloatArray) -> FloatArray:
    """``left // n`` each, plus one for the ``left % n`` largest desires of each group."""
    order = np.lexsort((idx, -wants, g))
    sorted_g = g[order]
    first = np.searchsorted(sorted_g, sorted_g, side="left")
    rank = np.empty(len(idx), dtype=np.int64)
    rank[order] = np.arange(len(idx)) - first
    share = np.floor(left[g] / count[g])
    extra = left[g] - share * count[g]
    return share + (rank < extra)
