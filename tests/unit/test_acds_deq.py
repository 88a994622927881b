"""DEQ (Algorithm 1) and EQUI on hand-checkable inputs, scalar and grouped forms."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from malleable.policies.hierarchical.deq import (
    deq,
    deq_grouped,
    deq_integral,
    equi_desires,
)


def test_recursion_satisfies_small_desires_in_rounds_then_shares_the_rest() -> None:
    # share 7: {1, 7} satisfied (8 used); share 20/2 = 10: {9} satisfied; share 11 for 40.
    assert deq([1, 7, 9, 40], 28) == [1, 7, 9, 11]


def test_one_round_then_equal_share() -> None:
    # share 5: {1, 2} satisfied; 17 left for two children wanting 10 and 20 -> 8.5 each.
    assert deq([1, 2, 10, 20], 20) == [1, 2, 8.5, 8.5]


def test_all_satisfied_leaves_the_surplus_unallocated() -> None:
    alloc = deq([1, 2, 3], 10)
    assert alloc == [1, 2, 3]
    assert sum(alloc) == 6


def test_none_satisfied_gives_everyone_the_equal_share() -> None:
    assert deq([10, 20, 30], 9) == [3, 3, 3]


def test_empty_and_zero_desires() -> None:
    assert deq([], 5) == []
    assert deq([0, 4], 2) == [0, 2]


def test_bad_input_is_refused() -> None:
    with pytest.raises(ValueError):
        deq([1], -1)
    with pytest.raises(ValueError):
        deq([-1], 1)
    with pytest.raises(ValueError):
        deq([float("nan")], 1)


def test_integral_rounds_desires_up_and_gives_the_remainder_to_the_largest() -> None:
    assert deq_integral([1, 7, 9, 40], 28) == [1, 7, 9, 11]
    assert deq_integral([10, 20, 30], 10) == [3, 3, 4]
    assert deq_integral([0.5, 2.2], 10) == [1, 3]
    assert deq_integral([2.0000000001], 10) == [2]  # float noise is not a processor


def test_equi_is_deq_with_infinite_desires_for_busy_children() -> None:
    want = equi_desires(np.array([True, False, True]))
    groups = np.zeros(3, dtype=np.int64)
    assert deq_grouped(want, groups, np.array([9.0])).tolist() == [4.5, 0, 4.5]
    assert deq_grouped(want, groups, np.array([9.0]), integral=True).tolist() == [5, 0, 4]


def test_equi_with_caps_fills_up_to_each_cap() -> None:
    want = equi_desires(np.array([True, True, True]), np.array([2.0, 50.0, 50.0]))
    alloc = deq_grouped(want, np.zeros(3, dtype=np.int64), np.array([20.0]))
    assert alloc.tolist() == [2, 9, 9]


def test_grouped_handles_several_parents_at_once() -> None:
    desires = np.array([1, 7, 9, 40, 10, 20, 30], dtype=float)
    groups = np.array([0, 0, 0, 0, 1, 1, 1])
    alloc = deq_grouped(desires, groups, np.array([28.0, 9.0]))
    assert alloc.tolist() == [1, 7, 9, 11, 3, 3, 3]


_desires = st.lists(st.floats(0, 100, allow_nan=False), min_size=0, max_size=12)


@settings(max_examples=60, deadline=None)
@given(_desires, st.floats(0, 300, allow_nan=False))
def test_grouped_fractional_matches_algorithm_1(desires: list[float], budget: float) -> None:
    got = deq_grouped(np.array(desires), np.zeros(len(desires), dtype=np.int64),
                      np.array([budget]))
    assert np.allclose(got, deq(desires, budget), rtol=1e-9, atol=1e-9)
    assert got.sum() <= budget * (1 + 1e-9) + 1e-9
    assert np.all(got <= np.array(desires) * (1 + 1e-9) + 1e-12)


@settings(max_examples=60, deadline=None)
@given(_desires, st.integers(0, 300))
def test_grouped_integral_matches_the_scalar_form(desires: list[float], budget: int) -> None:
    got = deq_grouped(np.array(desires), np.zeros(len(desires), dtype=np.int64),
                      np.array([float(budget)]), integral=True)
    want = deq_integral(desires, budget)
    assert got.tolist() == want
    assert sum(want) <= budget
    wants = [np.ceil(d - 1e-9) for d in desires]
    assert all(a <= w for a, w in zip(want, wants, strict=True))
    if sum(wants) > budget:  # someone deprived: nothing is left idle
        assert sum(want) == budget


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 3), st.floats(0, 50, allow_nan=False)), max_size=20),
       st.lists(st.floats(0, 100, allow_nan=False), min_size=4, max_size=4))
def test_grouping_is_the_same_as_one_call_per_parent(children: list[tuple[int, float]],
                                                     budgets: list[float]) -> None:
    groups = np.array([g for g, _ in children], dtype=np.int64)
    desires = np.array([d for _, d in children])
    got = deq_grouped(desires, groups, np.array(budgets))
    for g in range(4):
        mine = groups == g
        assert np.allclose(got[mine], deq(desires[mine].tolist(), budgets[g]), atol=1e-9)
