"""How a distributed array is laid out over processes, and how to move it to a new count.

Pure index arithmetic (numpy, no MPI), so that every redistribution is unit-tested
by simulating the processes in one Python process.

An array is distributed along its first axis; one "element" is one row (a number,
a structured record such as a particle, or a row of a matrix). A layout answers,
for a move from ``p`` old processes to ``q`` new ones:

* ``sends(old_lengths, q, rank)``: for old process ``rank``, which of its local
  elements go to which new process, in increasing global order;
* ``receives(old_lengths, q, rank)``: for new process ``rank``, which of its local
  elements come from which old process, in the same order.

A selection is a ``slice`` (contiguous) or an index array. Sizes are any-to-any.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import numpy.typing as npt

Selection = slice | npt.NDArray[np.int64]
Moves = list[tuple[int, Selection]]


def block_counts(n: int, p: int) -> list[int]:
    """Balanced block sizes of ``n`` elements over ``p`` processes (the first get one more)."""
    if p < 1:
        raise ValueError(f"process count {p} is below 1")
    if n < 0:
        raise ValueError(f"element count {n} is negative")
    base, extra = divmod(n, p)
    return [base + (1 if r < extra else 0) for r in range(p)]


def offsets(counts: Sequence[int]) -> list[int]:
    """Start of each block and the total at the end: ``[0, c0, c0+c1, ...]``."""
    return [0, *itertools.accumulate(counts)]


def selection_length(sel: Selection) -> int:
    """How many elements a selection picks."""
    if isinstance(sel, slice):
        return int(sel.stop - sel.start)
    return len(sel)


class Layout(Protocol):
    """A distribution of a 1-D sequence of elements over processes."""

    def local_lengths(self, n: int, p: int) -> list[int]:
        """How many elements each of ``p`` processes holds when the layout is canonical."""
        ...

    def sends(self, old_lengths: Sequence[int], q: int, rank: int) -> Moves:
        """(new rank, local selection) pairs for old process ``rank``; empty ones left out."""
        ...

    def receives(self, old_lengths: Sequence[int], q: int, rank: int) -> Moves:
        """(old rank, local selection) pairs for new process ``rank``; empty ones left out."""
        ...


@dataclass(frozen=True, slots=True)
class Block:
    """Contiguous blocks, balanced on the new processes (DMRlib's default pattern).

    The old blocks may have any lengths (an application may start unbalanced); the
    new ones are balanced with :func:`block_counts`.
    """

    def local_lengths(self, n: int, p: int) -> list[int]:
        return block_counts(n, p)

    def sends(self, old_lengths: Sequence[int], q: int, rank: int) -> Moves:
        old = offsets(old_lengths)
        new = offsets(block_counts(old[-1], q))
        return _overlaps(old[rank], old[rank + 1], new, base=old[rank])

    def receives(self, old_lengths: Sequence[int], q: int, rank: int) -> Moves:
        old = offsets(old_lengths)
        new = offsets(block_counts(old[-1], q))
        return _overlaps(new[rank], new[rank + 1], old, base=new[rank])


def _overlaps(start: int, stop: int, bounds: Sequence[int], base: int) -> Moves:
    """Where [start, stop) meets each block of ``bounds``, as slices local to ``base``."""
    moves: Moves = []
    for other in range(len(bounds) - 1):
        lo, hi = max(start, bounds[other]), min(stop, bounds[other + 1])
        if lo < hi:
            moves.append((other, slice(lo - base, hi - base)))
    return moves


@dataclass(frozen=True, slots=True)
class BlockCyclic:
    """Blocks of ``block`` elements dealt round-robin: global block ``b`` lives on ``b % p``.

    A process holds its blocks in increasing order, concatenated (the last global
    block may be short). ``block=1`` is the cyclic distribution.
    """

    block: int

    def __post_init__(self) -> None:
        if self.block < 1:
            raise ValueError(f"block-cyclic block size {self.block} is below 1")

    def local_lengths(self, n: int, p: int) -> list[int]:
        if p < 1:
            raise ValueError(f"process count {p} is below 1")
        full, rest = divmod(n, self.block)
        lengths = [self.block * (full // p + (1 if r < full % p else 0)) for r in range(p)]
        lengths[full % p] += rest
        return lengths

    def _check(self, old_lengths: Sequence[int]) -> int:
        n = sum(old_lengths)
        expected = self.local_lengths(n, len(old_lengths))
        if list(old_lengths) != expected:
            raise ValueError(f"local lengths {list(old_lengths)} are not a block-cyclic layout "
                             f"of {n} elements in blocks of {self.block} (expected {expected})")
        return n

    def sends(self, old_lengths: Sequence[int], q: int, rank: int) -> Moves:
        n = self._check(old_lengths)
        return self._moves(n, mine=rank, here=len(old_lengths), there=q)

    def receives(self, old_lengths: Sequence[int], q: int, rank: int) -> Moves:
        n = self._check(old_lengths)
        return self._moves(n, mine=rank, here=q, there=len(old_lengths))

    def _moves(self, n: int, mine: int, here: int, there: int) -> Moves:
        """Local positions of process ``mine`` (of ``here``) grouped by owner among ``there``."""
        nblocks = -(-n // self.block)
        blocks = np.arange(mine, nblocks, here, dtype=np.int64)  # my global blocks, in order
        if blocks.size == 0:
            return []
        sizes = np.minimum(self.block, n - blocks * self.block)
        starts = np.concatenate(([0], np.cumsum(sizes)[:-1]))  # local start of each block
        owners = blocks % there
        moves: Moves = []
        for other in range(there):
            picked = owners == other
            if not picked.any():
                continue
            moves.append((other, _expand(starts[picked], sizes[picked])))
        return moves


def _expand(starts: npt.NDArray[np.int64], sizes: npt.NDArray[np.int64]) -> Selection:
    """Element positions of blocks given by start and size (a slice when contiguous)."""
    total = int(sizes.sum())
    if starts.size == 1 or bool(np.all(starts[1:] == starts[:-1] + sizes[:-1])):
        return slice(int(starts[0]), int(starts[0]) + total)
    block_of = np.repeat(np.arange(starts.size), sizes)
    within = np.arange(total, dtype=np.int64) - np.repeat(np.cumsum(sizes) - sizes, sizes)
    result: npt.NDArray[np.int64] = (starts[block_of] + within).astype(np.int64)
    return result


def simulate(layout: Layout, pieces: Sequence[np.ndarray], q: int) -> list[np.ndarray]:
    """Redistribute local arrays ``pieces`` (one per old process) to ``q`` processes, in memory.

    The reference used by the unit tests and a model of what the MPI transfer does.
    """
    lengths = [len(x) for x in pieces]
    template = pieces[0]
    out: list[np.ndarray] = []
    for dst in range(q):
        parts: dict[int, np.ndarray] = {}
        for src in range(len(pieces)):
            for to, sel in layout.sends(lengths, q, src):
                if to == dst:
                    parts[src] = pieces[src][sel]
        recv = layout.receives(lengths, q, dst)
        size = sum(selection_length(sel) for _, sel in recv)
        local = np.empty((size, *template.shape[1:]), dtype=template.dtype)
        for src, sel in recv:
            local[sel] = parts[src]
        out.append(local)
    return out
