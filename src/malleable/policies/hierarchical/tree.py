"""The tree of scheduling nodes and its per-level quanta.

Levels are numbered as in the paper: jobs are level 1, the schedulers that hold
jobs (leaves of the scheduler tree) are level 2, and the root is level ``K``. A
:class:`TreeLayout` stores, for each scheduler level below the root, the index of
every node's parent one level up; jobs are attached to level-2 nodes by the caller.
A layout may hold several trees side by side (a forest: one root per tree), which
is how the simulator runs many repetitions at once.

A :class:`QuantumPattern` gives each scheduler level its quantum as a whole
multiple of the level-2 quantum ``L``; each level's quantum must be a multiple of
the one below (section 3.2). The paper's pattern is ``QF^(level-2) * L``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

IntArray = NDArray[np.int64]


@dataclass(frozen=True)
class TreeLayout:
    """Scheduler levels ``2..K``: node counts and each node's parent.

    ``parents[i]`` maps the nodes of level ``i + 2`` to their parents at level
    ``i + 3`` (so there are ``K - 2`` arrays); ``counts[i]`` is the number of nodes at
    level ``i + 2``.
    """

    counts: tuple[int, ...]
    parents: tuple[IntArray, ...]

    def __post_init__(self) -> None:
        if len(self.counts) < 1:
            raise ValueError("a tree needs at least one scheduler level (K >= 2)")
        if len(self.parents) != len(self.counts) - 1:
            raise ValueError(f"{len(self.counts)} levels need {len(self.counts) - 1} parent "
                             f"arrays, not {len(self.parents)}")
        for i, parent in enumerate(self.parents):
            self._check_level(i, parent)

    def _check_level(self, i: int, parent: IntArray) -> None:
        if len(parent) != self.counts[i]:
            raise ValueError(f"level {i + 2}: {len(parent)} parents for {self.counts[i]} nodes")
        if len(parent) and (parent.min() < 0 or parent.max() >= self.counts[i + 1]):
            raise ValueError(f"level {i + 2}: a parent index is outside level {i + 3}")
        if np.bincount(parent, minlength=self.counts[i + 1]).min(initial=1) == 0:
            raise ValueError(f"level {i + 3}: every node needs at least one child")

    @property
    def levels(self) -> int:
        """K: the number of levels, jobs included."""
        return len(self.counts) + 1

    def count(self, level: int) -> int:
        """Number of nodes at scheduler level ``level`` (2..K)."""
        return self.counts[level - 2]

    def parent(self, level: int) -> IntArray:
        """Parents (at ``level + 1``) of the nodes at ``level`` (2..K-1)."""
        return self.parents[level - 2]

    @property
    def roots(self) -> int:
        return self.counts[-1]

    def root_of_leaves(self) -> IntArray:
        """The root (tree index) above each level-2 node."""
        up = np.arange(self.counts[0], dtype=np.int64)
        for parent in self.parents:
            up = parent[up]
        return up


def chain(levels: int) -> TreeLayout:
    """A tree with one node per level (the classical two-level problem when K = 2)."""
    return TreeLayout((1,) * (levels - 1), tuple(np.zeros(1, dtype=np.int64)
                                                 for _ in range(levels - 2)))


def random_tree(levels: int, rng: np.random.Generator, fanout: tuple[int, int] = (1, 5)
                ) -> TreeLayout:
    """A random tree of ``levels`` levels (jobs included) as in section 4.2.

    Each scheduler node above level 2 gets a number of children drawn uniformly
    from ``fanout`` (inclusive); all leaves are at level 2.
    """
    if levels < 2:
        raise ValueError(f"a tree needs K >= 2 levels, not {levels}")
    lo, hi = fanout
    if not 1 <= lo <= hi:
        raise ValueError(f"fanout {fanout} must satisfy 1 <= low <= high")
    counts = [1]
    parents: list[IntArray] = []
    for _ in range(levels - 2):  # from the root down to level 2
        children = rng.integers(lo, hi + 1, size=counts[0])
        parents.insert(0, np.repeat(np.arange(counts[0], dtype=np.int64), children))
        counts.insert(0, int(children.sum()))
    return TreeLayout(tuple(counts), tuple(parents))


def forest(trees: Sequence[TreeLayout]) -> TreeLayout:
    """Several trees of the same depth side by side; root ``i`` is tree ``i``'s root."""
    if not trees:
        raise ValueError("a forest needs at least one tree")
    depth = trees[0].levels
    if any(t.levels != depth for t in trees):
        raise ValueError("every tree of a forest must have the same number of levels")
    counts = tuple(sum(t.counts[i] for t in trees) for i in range(depth - 1))
    parents: list[IntArray] = []
    for i in range(depth - 2):
        offsets = np.cumsum([0] + [t.counts[i + 1] for t in trees])[:-1]
        parents.append(np.concatenate([t.parents[i] + off for t, off in zip(trees, offsets,
                                                                              strict=True)]))
    return TreeLayout(counts, tuple(parents))


def leaf_offsets(trees: Sequence[TreeLayout]) -> IntArray:
    """Index of each tree's first level-2 node in :func:`forest` of ``trees``."""
    return np.cumsum([0] + [t.counts[0] for t in trees])[:-1].astype(np.int64)


@dataclass(frozen=True)
class QuantumPattern:
    """The quantum of each scheduler level, in multiples of the level-2 quantum ``L``.

    ``multiples[i]`` is the quantum of level ``i + 2``; ``multiples[0]`` is 1 and each
    entry divides the next (a level's quantum is a whole multiple of the level below).
    """

    multiples: tuple[int, ...]

    def __post_init__(self) -> None:
        if not self.multiples or self.multiples[0] != 1:
            raise ValueError("the level-2 quantum is the unit: multiples must start with 1")
        for below, above in zip(self.multiples, self.multiples[1:], strict=False):
            if above < below or above % below:
                raise ValueError(f"quantum {above}L is not a whole multiple of the level "
                                 f"below ({below}L)")

    @classmethod
    def geometric(cls, levels: int, factor: int) -> QuantumPattern:
        """The paper's pattern: level ``k`` has quantum ``factor^(k-2) * L`` (k = 2..K)."""
        if factor < 1:
            raise ValueError(f"quantum factor {factor} must be a whole number >= 1")
        return cls(tuple(factor ** i for i in range(levels - 1)))

    @property
    def levels(self) -> int:
        return len(self.multiples) + 1

    def quantum(self, level: int) -> int:
        """Quantum of scheduler level ``level`` (2..K), in units of ``L``."""
        return self.multiples[level - 2]

    def top_expiring(self, index: int) -> int:
        """Highest level whose quantum ends at the start of level-2 quantum ``index``."""
        top = 2
        for level in range(3, self.levels + 1):
            if index % self.quantum(level) == 0:
                top = level
        return top

    def top_between(self, previous: int, index: int) -> int:
        """Highest level with a quantum boundary in ``(previous, index]`` (2 if none)."""
        top = 2
        for level in range(3, self.levels + 1):
            q = self.quantum(level)
            if index // q > previous // q:
                top = level
        return top
