"""DMRlib's Algorithm 2 (dmr_resize) and the DmrPolicy built on it, on hand-checkable cases."""

from __future__ import annotations

import pytest

from malleable.model import (
    Defer,
    Grow,
    JobSpec,
    Place,
    Shrink,
    SizeRule,
    View,
    WaitingJob,
)
from malleable.policies.base import Policy
from malleable.policies.dmr import (
    DmrPolicy,
    JobLimits,
    Resize,
    ResizeKind,
    dmr,
    dmr_resize,
)
from malleable.policies.registry import make
from tests.fakes.builders import by_spec, cluster, drive, mjob, rigid, running

EXPAND, SHRINK, NONE = ResizeKind.EXPAND, ResizeKind.SHRINK, ResizeKind.NONE
CG = JobLimits(2, 32, 16)  # Table 5 of the paper


# ------------------------------------------------------------------ the rule, line by line


def test_below_preferred_expands_up_to_the_upper_limit_when_nodes_are_free() -> None:
    assert dmr_resize(4, CG, available=100) == Resize(EXPAND, 32)  # lines 1-2, capped at max
    assert dmr_resize(4, CG, available=6) == Resize(EXPAND, 10)


def test_below_preferred_expands_even_with_pending_jobs_but_never_shrinks() -> None:
    assert dmr_resize(4, CG, available=3, pending=[64]) == Resize(EXPAND, 7)
    assert dmr_resize(4, CG, available=0, pending=[1]) == Resize(NONE, 4)


def test_no_free_nodes_and_no_pending_jobs_changes_nothing() -> None:
    assert dmr_resize(16, CG, available=0) == Resize(NONE, 16)  # lines 10-11


def test_no_pending_jobs_expands_past_preferred() -> None:
    assert dmr_resize(16, CG, available=5) == Resize(EXPAND, 21)  # line 11
    assert dmr_resize(32, CG, available=5) == Resize(NONE, 32)  # at the upper limit


def test_above_preferred_shrinks_just_enough_for_a_pending_job() -> None:
    # 24 running, preferred 16, 2 free, a pending job of 6: release 4 -> 20
    assert dmr_resize(24, CG, available=2, pending=[6]) == Resize(SHRINK, 20, 0)


def test_shrink_never_goes_below_preferred() -> None:
    # the pending job needs 12 more, the job can give only 24 - 16 = 8
    assert dmr_resize(24, CG, available=0, pending=[12]) == Resize(NONE, 24)
    assert dmr_resize(24, CG, available=0, pending=[8]) == Resize(SHRINK, 16, 0)


def test_shrink_picks_the_first_pending_job_it_can_start() -> None:
    assert dmr_resize(24, CG, available=0, pending=[30, 5, 3]) == Resize(SHRINK, 19, 1)


def test_pending_job_that_cannot_be_helped_leaves_expansion_open() -> None:
    # lines 7-9: no shrink can start the pending job; the free node goes to this job
    assert dmr_resize(24, CG, available=1, pending=[40]) == Resize(EXPAND, 25)
    # at preferred with a pending job that does not fit: expand (line 8)
    assert dmr_resize(16, CG, available=1, pending=[40]) == Resize(EXPAND, 17)


def test_free_nodes_that_a_pending_job_fits_in_are_left_to_it() -> None:
    assert dmr_resize(16, CG, available=4, pending=[4]) == Resize(NONE, 16)
    assert dmr_resize(24, CG, available=4, pending=[3]) == Resize(NONE, 24)


def test_power_of_two_jobs_round_their_targets() -> None:
    ft = JobLimits(2, 32, 4, SizeRule.POW2)
    assert dmr_resize(4, ft, available=5) == Resize(EXPAND, 8)  # 9 -> 8
    assert dmr_resize(8, ft, available=3) == Resize(NONE, 8)  # 11 -> 8: nothing to gain
    # 16 -> give 3 for a pending 3-node job: 13 -> 8, still >= preferred 4
    assert dmr_resize(16, ft, available=0, pending=[3]) == Resize(SHRINK, 8, 0)


def test_bad_inputs_are_refused() -> None:
    with pytest.raises(ValueError, match="preferred"):
        JobLimits(4, 8, 2)
    with pytest.raises(ValueError, match="current size"):
        dmr_resize(0, CG, 3)


# ------------------------------------------------------------------ the policy


def _spec(job_id: str, lo: int, hi: int, pref: int, init: int) -> JobSpec:
    base = mjob(job_id, lo=lo, hi=hi, init=init)
    return JobSpec(base.id, base.kind, lo, hi, init, app=base.app, preferred_size=pref)


def test_policy_is_a_policy_and_registered_by_its_factory() -> None:
    assert isinstance(dmr(), Policy)
    assert make("dmr").name == "dmr"


def test_policy_grows_jobs_on_free_nodes_when_nothing_waits() -> None:
    a = _spec("a", 2, 32, 4, 2)
    view = View(0.0, {"c": cluster("c", 20, [running(a, 2, 0.0)])})
    sizes = {"a": 2}
    log = drive(DmrPolicy().decide(view, 0.0), by_spec({"a": a}, sizes))
    assert log == [(Grow("a", 18), 18)]


def test_policy_places_first_then_shrinks_toward_preferred_for_the_waiting_job() -> None:
    a = _spec("a", 2, 32, 4, 2)
    w = rigid("w", size=6)
    view = View(0.0, {"c": cluster("c", 20, [running(a, 18, 0.0)])}, [WaitingJob(w)])
    sizes = {"a": 18}
    log = drive(DmrPolicy().decide(view, 0.0), by_spec({"a": a, "w": w}, sizes))
    # 2 free: w cannot start; a gives back 4 so that 2 + 4 = 6 nodes start w next cycle
    assert log == [(Defer("w"), None), (Shrink("a", 4), 4)]
    assert sizes["a"] == 14


def test_policy_does_not_shrink_twice_for_the_same_waiting_job() -> None:
    a, b = _spec("a", 2, 32, 4, 2), _spec("b", 2, 32, 4, 2)
    w = rigid("w", size=6)
    jobs = [running(a, 10, 0.0), running(b, 10, 1.0)]
    view = View(0.0, {"c": cluster("c", 20, jobs)}, [WaitingJob(w)])
    sizes = {"a": 10, "b": 10}
    log = drive(DmrPolicy().decide(view, 0.0), by_spec({"a": a, "b": b, "w": w}, sizes))
    assert log == [(Defer("w"), None), (Shrink("a", 6), 6)]


def test_policy_leaves_a_job_that_is_still_releasing_and_counts_what_comes() -> None:
    a, b = _spec("a", 2, 32, 4, 2), _spec("b", 2, 32, 4, 2)
    w = rigid("w", size=6)
    jobs = [running(a, 10, 0.0, releasing=6), running(b, 10, 1.0)]
    view = View(0.0, {"c": cluster("c", 20, jobs)}, [WaitingJob(w)])
    log = drive(DmrPolicy().decide(view, 0.0), by_spec({"a": a, "b": b, "w": w}, {"a": 10,
                                                                              "b": 10}))
    # the 6 nodes a releases will start w: b is not shrunk (and not grown: no free node)
    assert log == [(Defer("w"), None)]


def test_policy_places_waiting_jobs_on_the_cluster_with_most_free_nodes() -> None:
    w = rigid("w", size=3)
    view = View(0.0, {"x": cluster("x", 4), "y": cluster("y", 8)}, [WaitingJob(w)])
    log = drive(DmrPolicy().decide(view, 0.0), by_spec({"w": w}, {}))
    assert log == [(Place("w", "y", 3), 3)]
