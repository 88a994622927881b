"""Cluster availability profiles: updates, queries and holes."""

from __future__ import annotations

import math
import random
from itertools import pairwise

import pytest

from malleable.coorm.profile import INF, Profile, first_fit_multi


def test_new_profile_is_flat() -> None:
    p = Profile(10, origin=5.0)
    assert p.steps() == ((5.0, 10),)
    assert p.available(0.0) == 10 and p.available(1e9) == 10
    assert p.first_fit(10, 100.0, 0.0) == 5.0
    assert p.first_fit(11, 1.0, 0.0) == INF


def test_add_splits_and_merges_breakpoints() -> None:
    p = Profile(10)
    p.add(10.0, 20.0, -4)
    assert p.steps() == ((0.0, 10), (10.0, 6), (20.0, 10))
    p.add(20.0, 30.0, -4)
    assert p.steps() == ((0.0, 10), (10.0, 6), (30.0, 10))  # 20 merged away
    p.add(10.0, 30.0, 4)
    assert p.steps() == ((0.0, 10),)
    p.add(5.0, INF, -3)
    assert p.steps() == ((0.0, 10), (5.0, 7))
    assert len(p) == 2


def test_add_before_origin_is_clipped() -> None:
    p = Profile(8, origin=100.0)
    p.add(0.0, 150.0, -2)
    assert p.steps() == ((100.0, 6), (150.0, 8))
    p.add(0.0, 50.0, -8)  # entirely in the past: no effect
    assert p.steps() == ((100.0, 6), (150.0, 8))


def test_queries() -> None:
    p = Profile.from_steps(10, [(0.0, 4), (10.0, 7), (20.0, 2), (30.0, 10)])
    assert [p.available(t) for t in (-1.0, 0.0, 9.9, 10.0, 25.0, 31.0)] == [4, 4, 4, 7, 2, 10]
    assert p.min_available(0.0, 10.0) == 4
    assert p.min_available(10.0, 20.0) == 7
    assert p.min_available(10.0, 20.5) == 2
    assert p.min_available(12.0, 12.0) == 7
    assert p.steps(after=15.0) == ((15.0, 7), (20.0, 2), (30.0, 10))
    assert p.breakpoints(10.0, 5) == [20.0, 30.0]


def test_first_fit_finds_the_first_hole() -> None:
    # 4 free until 10, 7 until 20, 2 until 30, then all 10
    p = Profile.from_steps(10, [(0.0, 4), (10.0, 7), (20.0, 2), (30.0, 10)])
    assert p.first_fit(4, 10.0, 0.0) == 0.0      # fits now, ends exactly at 10
    assert p.first_fit(4, 20.0, 0.0) == 0.0      # 4 then 7: still >= 4 until 20
    assert p.first_fit(4, 20.1, 0.0) == 30.0     # would cross the 2-host dip
    assert p.first_fit(5, 10.0, 0.0) == 10.0     # the 7-host hole [10, 20)
    assert p.first_fit(5, 10.5, 0.0) == 30.0
    assert p.first_fit(2, 100.0, 3.0) == 3.0     # starts at "after", not a breakpoint
    assert p.first_fit(8, 1.0, 0.0) == 30.0
    assert p.first_fit(0, 1.0, 7.0) == 7.0


def test_reserve_refuses_overbooking() -> None:
    p = Profile(4)
    p.reserve(0.0, 10.0, 3)
    with pytest.raises(ValueError, match="not available"):
        p.reserve(5.0, 15.0, 2)
    p.reserve(10.0, 15.0, 4)
    assert p.steps() == ((0.0, 1), (10.0, 0), (15.0, 4))


def test_from_steps_validates() -> None:
    with pytest.raises(ValueError, match="increase"):
        Profile.from_steps(4, [(0.0, 1), (0.0, 2)])
    with pytest.raises(ValueError, match="outside"):
        Profile.from_steps(4, [(0.0, 5)])
    with pytest.raises(ValueError, match="at least one"):
        Profile.from_steps(4, [])
    with pytest.raises(ValueError, match="negative"):
        Profile(-1)


def _random_profile(rng: random.Random, capacity: int) -> Profile:
    p = Profile(capacity, origin=0.0)
    for _ in range(rng.randint(0, 25)):
        start = rng.uniform(0, 100)
        end = start + rng.uniform(0.5, 40)
        n = rng.randint(1, capacity)
        if p.min_available(start, end) >= n:
            p.add(start, end if rng.random() < 0.9 else INF, -n)
    return p


def _brute_first_fit(p: Profile, hosts: int, duration: float, after: float) -> float:
    candidates = sorted({after} | {t for t, _ in p.steps() if t > after})
    for t in candidates:
        if p.min_available(t, t + duration) >= hosts:
            return t
    return INF


def test_first_fit_matches_brute_force_and_vector_form() -> None:
    rng = random.Random(42)
    for _ in range(200):
        cap = rng.randint(1, 16)
        p = _random_profile(rng, cap)
        after = rng.uniform(0, 80)
        durations = [rng.uniform(1, 50) for _ in range(cap)]
        vector = p.earliest_starts(durations, after)
        for n in range(1, cap + 1):
            expected = _brute_first_fit(p, n, durations[n - 1], after)
            assert p.first_fit(n, durations[n - 1], after) == expected
            assert vector[n - 1] == expected or (math.isinf(expected) and math.isinf(vector[n - 1]))


def test_first_fit_multi_needs_a_common_hole() -> None:
    a = Profile.from_steps(4, [(0.0, 4), (10.0, 0), (20.0, 4)])
    b = Profile.from_steps(4, [(0.0, 0), (5.0, 4)])
    # a is free [0, 10) and from 20; b from 5: 3 hosts each for 5 s fit at 5
    assert first_fit_multi({"a": a, "b": b}, {"a": 3, "b": 3}, 5.0, 0.0) == 5.0
    # for 6 s the window [5, 11) hits a's dip: next common start is 20
    assert first_fit_multi({"a": a, "b": b}, {"a": 3, "b": 3}, 6.0, 0.0) == 20.0
    assert first_fit_multi({"a": a, "b": b}, {"a": 5, "b": 1}, 1.0, 0.0) == INF
    assert first_fit_multi({"a": a}, {"a": 0}, 1.0, 3.0) == 3.0


def test_random_updates_match_a_dense_model() -> None:
    rng = random.Random(7)
    for _ in range(100):
        p = Profile(50, origin=0.0)
        dense = [50] * 120
        for _ in range(rng.randint(1, 30)):
            start = rng.randint(0, 100)
            end = rng.randint(start, 120)
            delta = rng.randint(-5, 5)
            p.add(float(start), float(end) if end < 120 else INF, delta)
            for t in range(start, 120 if end == 120 else end):
                dense[t] += delta
        assert [p.available(t + 0.5) for t in range(120)] == dense
        steps = p.steps()
        assert all(a[1] != b[1] for a, b in pairwise(steps))  # no redundant breakpoint
