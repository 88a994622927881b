"""The KOALA paper's mechanisms as model options, each on a scenario checkable by hand.

Times: GADGET-2 runs ``T(n) = 240 + 720/n`` s (600 s on 2, 312 s on 10, 360 s on 6); a
``fixed`` job takes its run time whatever its size.
"""

from __future__ import annotations

import pytest

from malleable.apps import UShaped, ft_time, gadget2_time
from malleable.errors import InputError
from malleable.model import Cluster, JobKind, JobSpec, RunningJob, View, WaitingJob
from malleable.policies.koala import KoalaPolicy
from malleable.sim.model_options import ModelOptions, model_options
from malleable.sim.run import SimConfig, SimResult, simulate
from tests.fakes.builders import by_spec, cluster, drive, mjob, running

ONE = (Cluster("c", 10),)


def fixed(job_id: str, size: int, submit: float, runtime: float) -> JobSpec:
    return JobSpec(job_id, JobKind.RIGID, size, size, size, submit_time=submit, app="fixed",
                   runtime=runtime)


def gadget(job_id: str, hi: int = 10, submit: float = 0.0) -> JobSpec:
    return JobSpec(job_id, JobKind.MALLEABLE, 2, hi, 2, submit_time=submit, app="gadget2")


def run(jobs: list[JobSpec], policy: KoalaPolicy | None = None, **options: object
        ) -> SimResult:
    model = model_options(options) if options else None
    return simulate(jobs, ONE, policy or KoalaPolicy.named("pra", "fpsma"),
                    SimConfig(model=model))


def record(result: SimResult, job_id: str):  # type: ignore[no-untyped-def]
    return next(r for r in result.records if r.spec.id == job_id)


# ----------------------------------------------------------------- U-shaped curves

def test_u_shaped_curve_passes_through_the_end_points_with_its_minimum_at_the_optimum() -> None:
    ft = UShaped(2, ft_time(2), 32, ft_time(32), 16)
    assert ft.coefficients == pytest.approx((38.75, 160.0, 0.625))
    assert ft(2) == pytest.approx(120.0) and ft(32) == pytest.approx(63.75)
    assert ft(16) == pytest.approx(58.75)
    assert ft(15) > ft(16) < ft(17)
    g = UShaped(2, gadget2_time(2), 46, gadget2_time(46), 23)
    assert min(range(2, 47), key=g) == 23


def test_u_shaped_optimum_must_make_a_u() -> None:
    with pytest.raises(ValueError, match="too small"):
        UShaped(2, 120.0, 32, 63.75, 8)  # 8 = sqrt(2 * 32): the minimum would be at 32
    with pytest.raises(ValueError, match="strictly between"):
        UShaped(2, 120.0, 32, 63.75, 32)
    with pytest.raises(InputError, match="too small"):
        model_options({"ft_optimum": 4})


def test_u_shaped_curve_changes_only_intermediate_sizes_in_a_run() -> None:
    # a job that stays at 8 of 8 nodes: 283.0 s on the U (optimum 23), 330 s on Amdahl
    job = [gadget("g", hi=8)]
    plain = record(run(job), "g")
    curved = record(run(job, gadget2_optimum=23), "g")
    assert plain.execution == pytest.approx(gadget2_time(8))
    u = UShaped(2, gadget2_time(2), 46, gadget2_time(46), 23)
    assert curved.execution == pytest.approx(u(8))


# ----------------------------------------------------------------- growth threshold

def test_growth_threshold_caps_the_managed_jobs_total_not_placement() -> None:
    jobs = [gadget("g"), fixed("r", 4, 10.0, 100.0)]
    free = run(jobs)
    assert record(free, "g").max_size == 10
    capped = run(jobs, KoalaPolicy.named("pra", "fpsma", grow_threshold=0.5))
    assert record(capped, "g").max_size == 5  # grows to 50% of 10 nodes, no further
    assert record(capped, "r").start == 10.0  # placement is not held back by the threshold
    with pytest.raises(ValueError, match="grow_threshold"):
        KoalaPolicy.named("pra", "egs", grow_threshold=0.0)


# ----------------------------------------------------------------- information service

def test_placement_waits_for_the_next_poll_of_the_information_service() -> None:
    # A holds 8 of 10 nodes 0-100; B (4 nodes) arrives at 110. Fresh views: B starts at
    # once. Polled every 60 s: the snapshot of 60 says 2 free, so B waits for the poll at 120.
    jobs = [fixed("a", 8, 0.0, 100.0), fixed("b", 4, 110.0, 50.0)]
    assert record(run(jobs), "b").start == 110.0
    assert record(run(jobs, info_period=60), "b").start == 120.0


def test_a_placement_on_a_stale_snapshot_that_no_longer_fits_is_deferred() -> None:
    # The snapshot at 0 says 10 free; A takes 8 at 0; B (4) arrives at 10 and is tried on
    # the stale 10, fails (2 really free), and starts when A ends at 100 (and a poll at 120).
    jobs = [fixed("a", 8, 0.0, 100.0), fixed("b", 4, 10.0, 50.0)]
    result = run(jobs, info_period=60)
    assert record(result, "b").start == 120.0
    assert record(run(jobs), "b").start == 100.0


# ----------------------------------------------------------------- grow latency

def test_grow_latency_held_from_the_request() -> None:
    # G starts at 0 on 2 and accepts 8 more; they are held at once, taken up at 60.
    # Work by 60: 60/600 = 0.1; the rest at 10 nodes: 0.9 * 312 = 280.8 -> ends at 340.8.
    # B (4 nodes) arriving at 30 finds nothing free: it starts when G ends.
    jobs = [gadget("g"), fixed("b", 4, 30.0, 1000.0)]
    result = run(jobs, grow_latency=60)
    assert record(result, "g").end == pytest.approx(340.8)
    assert record(result, "b").start == pytest.approx(340.8)


def test_grow_latency_held_only_on_arrival() -> None:
    # Same, but the 8 stay free until 60: B takes 4 of them at 30, so G gets the 4 still
    # free at 60 and runs at 6: 0.9 * 360 = 324 -> ends at 384.
    jobs = [gadget("g"), fixed("b", 4, 30.0, 1000.0)]
    result = run(jobs, grow_latency=60, grow_hold="arrival")
    assert record(result, "b").start == 30.0
    assert record(result, "g").max_size == 6
    assert record(result, "g").end == pytest.approx(384.0)


def test_a_pending_grow_is_not_offered_twice() -> None:
    g = mjob("g", hi=10)
    pending = RunningJob(g, "c", 2, 0.0, growing=8)  # 2 + 8 pending = its maximum
    view = View(5.0, {"c": cluster("c", 14, [pending], idle=4)}, [])
    log = drive(KoalaPolicy.named("pra", "fpsma").decide(view, 5.0), by_spec({"g": g}, {}))
    assert log == []  # 4 free, but g already has all it can take


# ----------------------------------------------------------------- adaptation points

def test_shrunk_nodes_are_released_at_the_next_adaptation_point() -> None:
    # PWA: G grows to 10 at 0; B (4) arrives at 10 and G must shrink by 4. Released at
    # once, B starts at 10; with adaptation points every 50 s from G's start, at 50.
    jobs = [gadget("g"), fixed("b", 4, 10.0, 100.0)]
    pwa = KoalaPolicy.named("pwa", "fpsma")
    assert record(run(jobs, pwa), "b").start == 10.0
    pwa = KoalaPolicy.named("pwa", "fpsma")
    assert record(run(jobs, pwa, adapt_period=50), "b").start == 50.0


def test_a_grow_is_taken_up_at_the_first_adaptation_point_after_arrival() -> None:
    # latency 30, points every 50 s: held at 0, taken up at 50. Work by 50: 50/600;
    # the rest at 10: (1 - 1/12) * 312 = 286 -> ends at 336.
    result = run([gadget("g")], grow_latency=30, adapt_period=50)
    assert record(result, "g").end == pytest.approx(336.0)


# ----------------------------------------------------------------- counts and input

def test_grow_decisions_with_more_than_one_candidate_are_counted() -> None:
    a, b = mjob("a", hi=10), mjob("b", hi=10)
    view = View(5.0, {"c": cluster("c", 20, [running(a, 2, 0.0), running(b, 2, 1.0)])}, [])
    policy = KoalaPolicy.named("pra", "egs")
    drive(policy.decide(view, 5.0), by_spec({"a": a, "b": b}, {"a": 2, "b": 2}))
    assert policy.counts == {"grow_decisions": 1, "grow_decisions_multi": 1}
    alone = View(5.0, {"c": cluster("c", 20, [running(a, 2, 0.0)])}, [WaitingJob(b)])
    policy = KoalaPolicy.named("pra", "egs")
    drive(policy.decide(alone, 5.0), by_spec({"a": a, "b": b}, {"a": 2}))
    assert policy.counts == {"grow_decisions": 1, "grow_decisions_multi": 0}


@pytest.mark.parametrize(("options", "message"), [
    ({"nosuch": 1}, "no model option nosuch; valid: info_period"),
    ({"grow_hold": "later"}, "grow_hold must be one of request, arrival"),
    ({"grow_latency": -1}, "non-negative"),
    ({"ft_optimum": 16.5}, "ft_optimum must be int"),
])
def test_bad_model_options_are_input_errors(options: dict[str, object], message: str) -> None:
    with pytest.raises(InputError, match=message):
        model_options(options)


def test_default_options_are_the_paper_setting() -> None:
    assert not ModelOptions().active and ModelOptions().changed() == {}
    jobs = [gadget("g"), fixed("b", 4, 10.0, 100.0)]
    plain = run(jobs)
    same = simulate(jobs, ONE, KoalaPolicy.named("pra", "fpsma"),
                    SimConfig(model=ModelOptions()))
    assert [(r.start, r.end, r.max_size) for r in plain.records] == \
        [(r.start, r.end, r.max_size) for r in same.records]
