from __future__ import annotations

import pytest

from malleable.model import JobKind, JobSpec, JobState, SizeRule


def test_pow2_job_accepts_largest_power_of_two_that_fits() -> None:
    ft = JobSpec("ft", JobKind.MALLEABLE, 2, 32, 2, app="ft", size_rule=SizeRule.POW2)
    assert ft.accepts(2, 5) == 2  # 7 -> 4
    assert ft.accepts(4, 3) == 0  # 7 -> 4: no change
    assert ft.accepts(16, 100) == 16  # capped at 32
    assert ft.releases(8, 1) == 4  # 7 -> 4
    assert ft.releases(2, 1) == 0  # already at the minimum


def test_any_size_job_accepts_up_to_its_maximum() -> None:
    g = JobSpec("g", JobKind.MALLEABLE, 2, 46, 2, app="gadget2")
    assert g.accepts(40, 10) == 6
    assert g.releases(10, 3) == 3
    assert g.releases(3, 5) == 1


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"min_size": 5, "max_size": 3, "initial_size": 4}, "minimum size 5 is above maximum"),
        ({"min_size": 0}, "below 1"),
        ({"initial_size": 50}, "initial size 50 is outside"),
        ({"submit_time": -1.0}, "negative"),
    ],
)
def test_bad_specs_say_what_is_wrong(kwargs: dict[str, object], message: str) -> None:
    base: dict[str, object] = {"min_size": 2, "max_size": 46, "initial_size": 2}
    base.update(kwargs)
    with pytest.raises(ValueError, match=message):
        JobSpec("x", JobKind.MALLEABLE, **base)  # type: ignore[arg-type]


def test_job_state_finished_is_a_plain_attribute_of_each_member() -> None:
    over = {JobState.COMPLETED, JobState.FAILED, JobState.CANCELLED, JobState.TIMEOUT}
    assert {s for s in JobState if s.finished} == over
    assert all(type(s.finished) is bool for s in JobState)
    assert "finished" not in JobState.__members__  # an attribute, not a ninth state
    assert len(JobState) == 8
