"""A-Control and A-Greedy desire estimators."""

from __future__ import annotations

import numpy as np
import pytest

from malleable.policies.hierarchical.estimators import AGreedyParams, a_control, a_greedy


def test_a_control_takes_the_average_parallelism_even_when_deprived() -> None:
    # 2 processors for a job of parallelism 8: work 2 per unit, span 2/8 per unit.
    assert a_control(np.array([2.0]), np.array([0.25]), np.array([1.0])).tolist() == [8.0]


def test_a_control_keeps_the_desire_of_a_job_that_did_not_progress() -> None:
    assert a_control(np.array([0.0]), np.array([0.0]), np.array([5.0])).tolist() == [5.0]


def test_a_greedy_multiplicative_rules() -> None:
    desire = np.array([4.0, 4.0, 4.0, 1.0])
    allotted = np.array([4.0, 4.0, 2.0, 1.0])
    work = np.array([3.9, 1.0, 2.0, 0.1])  # efficient, inefficient, efficient, inefficient
    got = a_greedy(desire, allotted, work, np.ones(4), AGreedyParams(0.8, 2.0))
    # efficient+satisfied doubles, inefficient halves, efficient+deprived keeps, floor at 1
    assert got.tolist() == [8.0, 2.0, 4.0, 1.0]


def test_a_greedy_keeps_the_desire_when_nothing_was_allotted() -> None:
    assert a_greedy(np.array([4.0]), np.array([0.0]), np.array([0.0]),
                    np.array([1.0])).tolist() == [4.0]


def test_a_greedy_parameters_are_checked() -> None:
    with pytest.raises(ValueError):
        AGreedyParams(utilization=0.0)
    with pytest.raises(ValueError):
        AGreedyParams(responsiveness=1.0)
