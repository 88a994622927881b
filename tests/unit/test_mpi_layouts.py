"""Redistribution plans (block, block-cyclic), simulated in one process: no MPI needed."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from malleable.mpi.layouts import Block, BlockCyclic, block_counts, offsets, simulate

PARTICLE = np.dtype([("id", np.int64), ("pos", np.float64, 3), ("mass", np.float64)])


def scatter_block(glob: np.ndarray, lengths: list[int]) -> list[np.ndarray]:
    bounds = offsets(lengths)
    return [glob[bounds[r]:bounds[r + 1]] for r in range(len(lengths))]


def scatter_cyclic(glob: np.ndarray, block: int, p: int) -> list[np.ndarray]:
    nblocks = -(-len(glob) // block)
    parts: list[list[np.ndarray]] = [[] for _ in range(p)]
    for b in range(nblocks):
        parts[b % p].append(glob[b * block:(b + 1) * block])
    return [np.concatenate(x) if x else glob[:0] for x in parts]


def test_block_counts_are_balanced_and_first_ranks_get_the_extra() -> None:
    assert block_counts(10, 4) == [3, 3, 2, 2]
    assert block_counts(3, 5) == [1, 1, 1, 0, 0]
    with pytest.raises(ValueError, match="below 1"):
        block_counts(4, 0)


def test_block_expand_two_to_five_moves_only_overlaps() -> None:
    sends = Block().sends([5, 5], 5, 0)  # old rank 0 holds 0..4; new ranks hold 2 each
    assert sends == [(0, slice(0, 2)), (1, slice(2, 4)), (2, slice(4, 5))]
    assert Block().receives([5, 5], 5, 2) == [(0, slice(0, 1)), (1, slice(1, 2))]


@settings(max_examples=150, deadline=None)
@given(n=st.integers(0, 120), p=st.integers(1, 7), q=st.integers(1, 7))
def test_block_any_to_any_matches_the_canonical_layout(n: int, p: int, q: int) -> None:
    glob = np.arange(n, dtype=np.float64) * 1.5
    got = simulate(Block(), scatter_block(glob, block_counts(n, p)), q)
    want = scatter_block(glob, block_counts(n, q))
    assert all(np.array_equal(a, b) for a, b in zip(got, want, strict=True))


@settings(max_examples=60, deadline=None)
@given(lengths=st.lists(st.integers(0, 30), min_size=1, max_size=6), q=st.integers(1, 6))
def test_block_accepts_unbalanced_old_blocks(lengths: list[int], q: int) -> None:
    glob = np.arange(sum(lengths))
    got = simulate(Block(), scatter_block(glob, lengths), q)
    assert np.array_equal(np.concatenate(got), glob)
    assert [len(x) for x in got] == block_counts(len(glob), q)


@settings(max_examples=150, deadline=None)
@given(n=st.integers(0, 120), p=st.integers(1, 7), q=st.integers(1, 7), block=st.integers(1, 9))
def test_block_cyclic_any_to_any(n: int, p: int, q: int, block: int) -> None:
    glob = np.arange(n, dtype=np.int32)
    layout = BlockCyclic(block)
    old = scatter_cyclic(glob, block, p)
    assert [len(x) for x in old] == layout.local_lengths(n, p)
    got = simulate(layout, old, q)
    want = scatter_cyclic(glob, block, q)
    assert all(np.array_equal(a, b) for a, b in zip(got, want, strict=True))


def test_block_cyclic_refuses_a_layout_that_is_not_block_cyclic() -> None:
    with pytest.raises(ValueError, match="not a block-cyclic layout"):
        BlockCyclic(2).sends([5, 1], 3, 0)
    with pytest.raises(ValueError, match="below 1"):
        BlockCyclic(0)


def test_rows_of_a_matrix_and_structured_records_move_whole() -> None:
    matrix = np.arange(7 * 3, dtype=np.float64).reshape(7, 3)
    got = simulate(Block(), scatter_block(matrix, [4, 3]), 3)
    assert [x.shape for x in got] == [(3, 3), (2, 3), (2, 3)]
    assert np.array_equal(np.concatenate(got), matrix)
    parts = np.zeros(9, dtype=PARTICLE)
    parts["id"] = np.arange(9)
    parts["pos"][:, 0] = np.arange(9) * 0.5
    got = simulate(BlockCyclic(2), scatter_cyclic(parts, 2, 2), 3)
    assert got[0].dtype == PARTICLE
    assert list(got[0]["id"]) == [0, 1, 6, 7]
    assert list(got[2]["pos"][:, 0]) == [2.0, 2.5]
