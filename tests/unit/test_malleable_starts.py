"""Issue 39: EASY's start size for malleable jobs (``malleable_start``) and KOALA's growth
cap (``grow_cap``), both options; the defaults keep the old behaviour."""

from __future__ import annotations

import pytest

from malleable.errors import InputError
from malleable.model import Cluster, JobKind, JobSpec
from malleable.policies.easy import EasyPolicy, easy, start_size
from malleable.policies.factories import egs, fpsma
from malleable.policies.koala import ceiling
from malleable.policies.registry import make
from malleable.sim.run import simulate


def _malleable(job_id: str, initial: int = 2, high: int = 16, preferred: int | None = 4,
               submit: float = 0.0) -> JobSpec:
    return JobSpec(job_id, JobKind.MALLEABLE, 1, high, initial, submit_time=submit,
                   app="amdahl:0.1", runtime=100.0, preferred_size=preferred, walltime=1000.0)


@pytest.mark.parametrize(("rule", "free", "size"), [
    ("largest", 10, 10), ("preferred", 10, 4), ("minimum", 10, 2),
    ("largest", 3, 3), ("preferred", 3, 3), ("minimum", 3, 2), ("preferred", 1, 0)])
def test_start_size_of_a_malleable_job(rule: str, free: int, size: int) -> None:
    assert start_size(_malleable("a"), free, rule) == size


def test_start_size_without_a_preferred_size_is_up_to_the_maximum() -> None:
    assert start_size(_malleable("a", preferred=None), 20, "preferred") == 16


def test_the_rule_leaves_moldable_and_rigid_jobs_alone() -> None:
    moldable = JobSpec("m", JobKind.MOLDABLE, 2, 8, 2, runtime=1.0, preferred_size=4)
    rigid = JobSpec("r", JobKind.RIGID, 3, 3, 3, runtime=1.0)
    for rule in ("largest", "preferred", "minimum"):
        assert start_size(moldable, 10, rule) == 8
        assert start_size(rigid, 10, rule) == 3


@pytest.mark.parametrize(("rule", "size"), [("largest", 16), ("preferred", 4),
                                            ("minimum", 2)])
def test_easy_starts_a_malleable_job_where_the_option_says(rule: str, size: int) -> None:
    result = simulate([_malleable("a")], [Cluster("c", 16)], easy(rule))
    assert result.records[0].max_size == size


def test_easy_default_is_the_preferred_size_and_a_bad_rule_is_refused() -> None:
    assert EasyPolicy().malleable_start == "preferred"  # issue 39, by measurement
    assert make("easy").malleable_start == "preferred"  # type: ignore[attr-defined]
    result = simulate([_malleable("a")], [Cluster("c", 16)], EasyPolicy())
    assert result.records[0].max_size == 4
    with pytest.raises(InputError, match="malleable_start"):
        make("easy", malleable_start="half")


def test_growth_cap_ceiling() -> None:
    spec = _malleable("a", initial=3, high=16)
    assert ceiling(spec, 0.0) == 16
    assert ceiling(spec, 2.0) == 6
    assert ceiling(spec, 10.0) == 16
    with pytest.raises(ValueError, match="grow_cap"):
        fpsma(grow_cap=0.5)


@pytest.mark.parametrize("factory", [fpsma, egs])
def test_growth_cap_stops_growth_and_lets_pra_place_beside(factory: object) -> None:
    jobs = [_malleable("a", preferred=None), _malleable("b", preferred=None, submit=1.0)]
    build = factory  # type: ignore[assignment]
    capped = simulate(list(jobs), [Cluster("c", 16)], build(grow_cap=2.0))  # type: ignore[operator]
    sizes = {r.spec.id: r.max_size for r in capped.records}
    starts = {r.spec.id: r.start for r in capped.records}
    assert sizes == {"a": 4, "b": 4}
    assert starts["b"] == 1.0  # placed beside a, which is at its cap
    free = simulate(list(jobs), [Cluster("c", 16)], build())  # type: ignore[operator]
    assert {r.spec.id: r.max_size for r in free.records}["a"] == 16
