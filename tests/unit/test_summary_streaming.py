"""The summary's means read their figures once, without a list (issue 17, memory at 1M)."""

from __future__ import annotations

import math
import random
from collections.abc import Iterator

from malleable.metrics.summary import _mean, _median


def test_mean_of_a_generator_is_the_list_mean_to_the_last_bit() -> None:
    rng = random.Random(7)
    values = [rng.uniform(0, 1e6) for _ in range(10_000)] + [math.nan, 1e-9, 3e15]
    rng.shuffle(values)
    finite = [v for v in values if not math.isnan(v)]
    expected = sum(finite) / len(finite)
    assert _mean(v for v in values) == expected
    assert _mean(values) == expected


def test_mean_reads_its_values_once_and_ignores_nan() -> None:
    reads = []

    def figures() -> Iterator[float]:
        for v in (1.0, math.nan, 2.0, 6.0):
            reads.append(v)
            yield v

    assert _mean(figures()) == 3.0
    assert len(reads) == 4
    assert math.isnan(_mean(iter([math.nan])))
    assert math.isnan(_mean(iter([])))


def test_median_sorts_its_own_list() -> None:
    assert _median([3.0, 1.0, 2.0]) == 2.0
    assert _median([4.0, 1.0, 3.0, 2.0]) == 2.5
    assert math.isnan(_median([]))
