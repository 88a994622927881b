"""Feitelson's 1996 model: Poisson arrivals scaled by the factor, sizes, run times, repeats."""

from __future__ import annotations

import itertools
import statistics

import pytest

from malleable.workloads.feitelson import FeitelsonModel, arrivals, as_specs, generate


def test_arrivals_start_at_zero_and_increase() -> None:
    times = arrivals(500, seed=1)
    assert times[0] == 0.0
    assert all(b >= a for a, b in itertools.pairwise(times))


def test_arrivals_are_exponential_with_the_mean_times_the_factor() -> None:
    for factor in (0.5, 1.0, 3.0):
        times = arrivals(20001, seed=7,
                         model=FeitelsonModel(mean_interarrival=10.0, factor=factor))
        gaps = [b - a for a, b in itertools.pairwise(times)]
        mean = statistics.fmean(gaps)
        assert mean == pytest.approx(10.0 * factor, rel=0.03)
        assert statistics.pstdev(gaps) == pytest.approx(mean, rel=0.05)  # CV 1: exponential


def test_the_factor_scales_the_same_draw() -> None:
    one = arrivals(100, seed=4)
    two = arrivals(100, seed=4, model=FeitelsonModel(factor=2.0))
    assert two == pytest.approx([2 * t for t in one])


def test_sizes_favour_small_jobs_and_powers_of_two() -> None:
    jobs = generate(20000, seed=1, model=FeitelsonModel(max_size=64))
    count = {n: sum(1 for j in jobs if j.size == n) for n in (1, 2, 3, 4, 5, 8, 9, 16, 17)}
    assert count[1] > count[2] > count[4] > count[8] > count[16]
    assert count[4] > count[3] and count[8] > count[5] and count[16] > count[9] > count[17]
    assert all(1 <= j.size <= 64 for j in jobs)


def test_large_jobs_run_longer() -> None:
    model = FeitelsonModel(max_size=64)
    assert model.long_probability(1) == pytest.approx(0.1)
    assert model.long_probability(64) == pytest.approx(0.9)
    jobs = generate(20000, seed=2, model=model)
    small = statistics.fmean(j.runtime for j in jobs if j.size <= 2)
    large = statistics.fmean(j.runtime for j in jobs if j.size >= 16)
    assert large > 2 * small


def test_repeats_follow_their_previous_run() -> None:
    jobs = generate(3000, seed=3)
    assert len(jobs) == 3000
    assert [j.submit for j in jobs] == sorted(j.submit for j in jobs)
    runs: dict[int, list[tuple[int, float, float, int]]] = {}
    for j in jobs:
        runs.setdefault(j.job, []).append((j.repeat, j.submit, j.runtime, j.size))
    repeated = [r for r in runs.values() if len(r) > 1]
    assert repeated
    for r in repeated:
        r.sort()
        for (_, s0, rt0, n0), (_, s1, _, n1) in itertools.pairwise(r):
            assert s1 == pytest.approx(s0 + rt0) and n1 == n0


def test_generate_keeps_the_earliest_submissions() -> None:
    short, long = generate(200, seed=9), generate(400, seed=9)
    assert short == long[:200]


def test_as_specs_and_bad_parameters() -> None:
    specs = as_specs(generate(5, seed=1))
    assert [s.id for s in specs] == ["f1", "f2", "f3", "f4", "f5"]
    assert all(s.runtime == s.walltime for s in specs)
    with pytest.raises(ValueError):
        FeitelsonModel(factor=0)
    with pytest.raises(ValueError):
        arrivals(-1, seed=1)
