"""The inlined bounds check of every SWF line (``swf._check_bounds``) refuses exactly what
:meth:`Bound.problem` refuses, with its message (issue 17 made it a lean loop over tuples)."""

from __future__ import annotations

import random

import pytest

from malleable.errors import InputError
from malleable.workloads import swf

EDGES = [-2.0, -1.5, -1.0, -0.5, 0.0, 0.5, 1.0, 1.5, 2.0, 7.0, 7.25,
         float(swf.MAX_SIZE), swf.MAX_SIZE + 1.0, float(swf.MAX_TIME), swf.MAX_TIME + 0.5,
         float(swf.MAX_NUMBER), swf.MAX_NUMBER + 1.0, -1e12, 1e12]
GOOD = [1.0, 0.0, -1.0, 300.0, 4.0, -1.0, -1.0, 4.0, 600.0, -1.0, 1.0, 1.0, 1.0, -1.0, 1.0,
        -1.0, -1.0, -1.0, 2.0, 2.0, 8.0, -1.0, 1.0]


def _reference(fields: list[str], values: list[float]) -> str:
    bounds = swf.BOUNDS + swf.MALLEABLE_BOUNDS if len(values) == 23 else swf.BOUNDS
    for bound in bounds:
        problem = bound.problem(fields[bound.field - 1], values[bound.field - 1])
        if problem:
            return problem
    return ""


def _check(values: list[float]) -> str:
    fields = [repr(v) for v in values]
    try:
        swf._check_bounds(fields, values, "w.swf", 3)
    except InputError as exc:
        return str(exc).removeprefix("w.swf:3: ")
    return ""


@pytest.mark.parametrize("width", [18, 23])
def test_every_edge_value_of_every_field(width: int) -> None:
    for index in range(width):
        for value in EDGES:
            values = GOOD[:width]
            values[index] = value
            assert _check(values) == _reference([repr(v) for v in values], values), \
                (index + 1, value)


def test_random_lines_with_several_bad_fields() -> None:
    rng = random.Random(17)
    for _ in range(3000):
        width = rng.choice([18, 23])
        values = GOOD[:width]
        for index in rng.sample(range(width), rng.randint(1, 4)):
            values[index] = rng.choice(EDGES)
        assert _check(values) == _reference([repr(v) for v in values], values), values
