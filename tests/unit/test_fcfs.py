"""Strict FCFS with first fit: hand-checkable views and a small simulated schedule."""

from __future__ import annotations

from malleable.model import Cluster, Defer, JobKind, JobSpec, Place, Reject, View, WaitingJob
from malleable.policies.fcfs import FCFS
from malleable.sim.run import simulate
from tests.fakes.builders import by_spec, cluster, drive, mjob, rigid


def _decide(view: View, specs: dict[str, JobSpec], refuse: frozenset[str] = frozenset()
            ) -> list:
    answer = by_spec(specs, {})

    def reply(action: object) -> int | None:
        if isinstance(action, Place) and action.job_id in refuse:
            return 0
        return answer(action)  # type: ignore[arg-type]

    return drive(FCFS().decide(view, view.time), reply)


def test_places_in_order_on_the_first_cluster_that_fits() -> None:
    a, b, c = rigid("a", 4), rigid("b", 3), rigid("c", 2)
    view = View(0.0, {"x": cluster("x", 5), "y": cluster("y", 8)},
                [WaitingJob(a), WaitingJob(b), WaitingJob(c)])
    log = _decide(view, {"a": a, "b": b, "c": c})
    # a fits on x (first); b no longer fits on x (1 left) so goes to y; c fits on y
    assert log == [(Place("a", "x", 4), 4), (Place("b", "y", 3), 3), (Place("c", "y", 2), 2)]


def test_nothing_passes_a_head_that_does_not_fit() -> None:
    big, small = rigid("big", 6), rigid("small", 1)
    view = View(0.0, {"x": cluster("x", 8, idle=5)}, [WaitingJob(big), WaitingJob(small)])
    log = _decide(view, {"big": big, "small": small})
    assert log == [(Defer("big"), None)]  # small would fit, but must not pass big


def test_a_job_larger_than_every_cluster_is_rejected_and_the_queue_goes_on() -> None:
    huge, small = rigid("huge", 9), rigid("small", 1)
    view = View(0.0, {"x": cluster("x", 8, reserve=0)}, [WaitingJob(huge), WaitingJob(small)])
    log = _decide(view, {"huge": huge, "small": small})
    assert isinstance(log[0][0], Reject)
    assert log[1] == (Place("small", "x", 1), 1)


def test_malleable_jobs_start_at_their_initial_size_and_a_refusal_stops_the_scan() -> None:
    m, r = mjob("m", lo=2, hi=16, init=4), rigid("r", 1)
    view = View(0.0, {"x": cluster("x", 8)}, [WaitingJob(m), WaitingJob(r)])
    assert _decide(view, {"m": m, "r": r})[0] == (Place("m", "x", 4), 4)
    log = _decide(view, {"m": m, "r": r}, refuse=frozenset({"m"}))
    assert log == [(Place("m", "x", 4), 0), (Defer("m"), None)]


def _job(i: int, submit: float, runtime: float, size: int) -> JobSpec:
    return JobSpec(str(i), JobKind.RIGID, size, size, size, submit_time=submit, runtime=runtime)


def test_simulated_schedule_ends_before_arrivals_and_keeps_strict_order() -> None:
    jobs = [
        _job(1, 0, 10, 3),   # starts at 0, ends at 10
        _job(2, 1, 5, 2),    # waits for 1 (only 1 node idle), starts at 10
        _job(3, 2, 1, 1),    # would fit at 2 but must not pass job 2: starts at 10
        _job(4, 10, 4, 2),   # arrives when job 1 ends: the end frees nodes first
    ]
    result = simulate(jobs, [Cluster("c", 4)], FCFS())
    starts = {r.spec.id: r.start for r in result.records}
    # at 10: 1 ends (4 idle), 4 arrives; queue 2, 3, 4 -> 2 (2 nodes), 3 (1 node); 4 waits
    # for 3 to end at 11
    assert starts == {"1": 0.0, "2": 10.0, "3": 10.0, "4": 11.0}
