"""The seven parallelism profiles and the malleable jobs built from Downey's model."""

from __future__ import annotations

import math

import numpy as np
import pytest

from malleable.sim.quantum.jobs import DowneyParams, build_jobs, downey_jobs
from malleable.sim.quantum.profiles import PROFILES, Profile, curve, peak, phase_heights


@pytest.mark.parametrize("profile", PROFILES)
@pytest.mark.parametrize("increasing", [True, False])
@pytest.mark.parametrize("average", [1.0, 3.7, 64.0, 256.0])
def test_every_profile_keeps_the_step_phase_work_and_average(profile: Profile,
                                                              increasing: bool,
                                                              average: float) -> None:
    step = phase_heights(Profile.STEP, average, increasing)
    heights = phase_heights(profile, average, increasing)
    assert len(heights) == len(step)  # same phase length (equal segments)
    assert heights.mean() == pytest.approx(step.mean(), rel=1e-12)  # same work and average
    assert heights.min() >= 1.0 - 1e-12
    x = (np.arange(200_000) + 0.5) / 200_000  # the continuous curve, by midpoint rule
    assert curve(profile, average, increasing, x).mean() == pytest.approx(average, rel=1e-3)


def test_step_is_flat_and_the_others_rise_or_fall() -> None:
    assert np.allclose(phase_heights(Profile.STEP, 8.0, True), 8.0)
    for profile in PROFILES[1:]:
        up = phase_heights(profile, 8.0, True)
        assert np.all(np.diff(up) >= -1e-12) and up[-1] > up[0]
        assert np.allclose(phase_heights(profile, 8.0, False), up[::-1])


def test_profiles_are_ordered_from_early_to_late_rise() -> None:
    peaks = [peak(p, 10.0) for p in PROFILES]
    assert peaks == sorted(peaks)
    assert peak(Profile.RAMP, 10.0) == pytest.approx(19.0)
    assert peak(Profile.IMPULSE, 10.0) == pytest.approx(91.0)


def test_a_job_keeps_its_work_and_span_and_alternates_increase_and_decrease() -> None:
    rng = np.random.default_rng(0)
    jobs = build_jobs(np.array([0.0]), np.array([350.0]), np.array([7.0]), rng)
    heights, spans = jobs.job(0)
    assert float(heights @ spans) == pytest.approx(350.0)
    assert float(spans.sum()) == pytest.approx(50.0)  # span = work / A
    assert len(heights) == 50  # five phases of ten segments
    phases = heights.reshape(5, 10)
    for p, phase in enumerate(phases):
        if not np.allclose(phase, phase[0]):  # not a Step phase
            assert (phase[-1] > phase[0]) == (p % 2 == 0)


def test_a_short_last_phase_is_scaled_not_dropped() -> None:
    jobs = build_jobs(np.array([0.0]), np.array([25.0]), np.array([2.0]),
                      np.random.default_rng(1))
    heights, spans = jobs.job(0)
    assert float(spans.sum()) == pytest.approx(12.5)
    assert float(heights @ spans) == pytest.approx(25.0)
    assert float(spans[-1]) == pytest.approx(0.25)


def test_downey_jobs_follow_table_1() -> None:
    params = DowneyParams()
    jobs = downey_jobs(4000, np.random.default_rng(5), params)
    lo, hi = params.log_work_range
    assert (lo, hi) == pytest.approx((0.14 / 0.073, 1.14 / 0.073))
    logw = np.log(jobs.work / params.work_scale)
    assert logw.min() >= lo and logw.max() <= hi
    assert np.all((jobs.parallelism >= 1) & (jobs.parallelism <= 256))
    # log-uniform: the median of ln A is half of ln 256
    assert np.median(np.log(jobs.parallelism)) == pytest.approx(math.log(256) / 2, rel=0.05)
    assert np.allclose(np.add.reduceat(jobs.heights * jobs.spans, jobs.start[:-1]), jobs.work)
    assert np.all(np.diff(jobs.release) >= 0)


def test_arrival_rate_makes_the_offered_load() -> None:
    params = DowneyParams()
    # n = 160 rho: 320 jobs are load 2, i.e. twice the processors' worth of work per time
    rate = params.arrival_rate(320)
    assert rate * params.mean_work / params.processors == pytest.approx(2.0)
    window = 320 / rate
    assert window == pytest.approx(160 * params.mean_work / params.processors)


def test_table_1_parallelism_is_drawn_from_1_to_256_as_before() -> None:
    from malleable.sim.quantum.jobs import sample_downey

    params = DowneyParams()
    _, _, parallelism = sample_downey(50, np.random.default_rng(7), params)
    rng = np.random.default_rng(7)
    lo, hi = params.log_work_range
    rng.uniform(lo, hi, 50)  # the works come first, from the same stream
    assert np.array_equal(parallelism, np.exp(rng.uniform(0.0, math.log(256.0), 50)))


def test_the_contention_regime_draws_parallelism_from_its_lower_end() -> None:
    from malleable.sim.quantum.jobs import sample_downey

    _, _, wide = sample_downey(2000, np.random.default_rng(3), DowneyParams(min_parallelism=16))
    assert wide.min() >= 16.0 and wide.max() <= 256.0
    # log-uniform: half of the draws below the geometric middle, sqrt(16 * 256) = 64
    assert np.mean(wide < 64.0) == pytest.approx(0.5, abs=0.05)
    _, _, flat = sample_downey(10, np.random.default_rng(3),
                               DowneyParams(min_parallelism=64, max_parallelism=64))
    assert np.allclose(flat, 64.0)


@pytest.mark.parametrize("low", [0.5, 300.0])
def test_a_lowest_parallelism_outside_1_to_the_highest_is_refused(low: float) -> None:
    with pytest.raises(ValueError, match="min_parallelism"):
        DowneyParams(min_parallelism=low)
