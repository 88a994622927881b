"""Malleability parameters, size rules and inhibitors (pure, no MPI)."""

from __future__ import annotations

import pytest

from malleable.model import SizeRule
from malleable.mpi.params import CheckClock, Inhibitors, Params


def test_params_validate_their_bounds() -> None:
    with pytest.raises(ValueError, match="below 1"):
        Params(0, 4)
    with pytest.raises(ValueError, match="below minimum"):
        Params(4, 2)
    with pytest.raises(ValueError, match="outside"):
        Params(2, 8, 9)
    assert Params(2, 8).target_preferred == 2
    assert Params(2, 8, 4).target_preferred == 4


def test_any_size_takes_the_offer_within_bounds() -> None:
    p = Params(2, 6)
    assert p.accept(2, 4) == 4
    assert p.accept(2, 9) == 6  # capped at the maximum
    assert p.accept(4, 1) == 2  # a shrink stops at the minimum
    assert p.accept(2, 1) == 2  # nothing below the minimum: declined
    assert p.accept(3, 3) == 3


def test_powers_of_two_take_the_largest_fit_and_give_the_rest_back() -> None:
    fft = Params(1, 16, size_rule=SizeRule.POW2)
    assert fft.accept(2, 5) == 4  # offered 5: takes 4
    assert fft.accept(4, 7) == 4  # 7 -> 4 is no growth: declined
    assert fft.accept(8, 6) == 4  # asked to go to 6: goes to 4
    assert Params(3, 16, size_rule=SizeRule.POW2).accept(4, 3) == 4  # 2 < minimum 3


def test_inhibitors_validate_and_count_iterations_and_time() -> None:
    with pytest.raises(ValueError, match="period"):
        Inhibitors(period=-1)
    with pytest.raises(ValueError, match="every"):
        Inhibitors(every=0)
    clock = CheckClock(Inhibitors(period=2.0, every=5))
    assert clock.iteration_due(0) and clock.time_due(100.0)
    clock.checked(0, 100.0)
    assert not clock.iteration_due(4)
    assert clock.iteration_due(5)
    assert not clock.time_due(101.9)
    assert clock.time_due(102.0)
