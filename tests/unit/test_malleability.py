"""FPSMA, EGS and equipartition on hand-checkable cases (KOALA Figs. 4 and 5)."""

from __future__ import annotations

from malleable.model import Grow, Shrink, SizeRule
from malleable.policies.malleability import EGS, FPSMA, Equipartition, level_down, level_up
from tests.fakes.builders import by_spec, drive, mjob, running


def _jobs(*starts: float, size: int = 2, rule: SizeRule = SizeRule.ANY, hi: int = 46):
    specs = {f"j{i}": mjob(f"j{i}", hi=hi, rule=rule) for i in range(len(starts))}
    views = [running(specs[f"j{i}"], size, s) for i, s in enumerate(starts)]
    views.sort(key=lambda j: j.start_time)
    return specs, views


def test_fpsma_grow_offers_everything_to_the_oldest_first() -> None:
    specs, jobs = _jobs(30.0, 10.0, 20.0, hi=10)
    sizes = {j.id: j.size for j in jobs}
    log = drive(FPSMA().grow(jobs, 12), by_spec(specs, sizes))
    # j1 (start 10) takes 8 of 12 (max 10), j2 (start 20) takes the remaining 4.
    assert log == [(Grow("j1", 12), 8), (Grow("j2", 4), 4)]


def test_fpsma_shrink_starts_from_the_youngest() -> None:
    specs, jobs = _jobs(10.0, 20.0, 30.0, size=6)
    sizes = {j.id: j.size for j in jobs}
    log = drive(FPSMA().shrink(jobs, 7, True), by_spec(specs, sizes))
    assert log == [(Shrink("j2", 7, True), 4), (Shrink("j1", 3, True), 3)]


def test_fpsma_grow_answer_below_offer_passes_the_rest_on() -> None:
    # an FT job (powers of two) at 2 offered 5 accepts 2 (to reach 4); the rest goes on
    specs, jobs = _jobs(1.0, 2.0, rule=SizeRule.POW2, hi=32)
    sizes = {j.id: j.size for j in jobs}
    log = drive(FPSMA().grow(jobs, 5), by_spec(specs, sizes))
    assert log == [(Grow("j0", 5), 2), (Grow("j1", 3), 2)]  # 2 + 3 = 5 -> 4


def test_egs_grow_gives_the_bonus_to_the_oldest() -> None:
    specs, jobs = _jobs(30.0, 10.0, 20.0)
    sizes = {j.id: j.size for j in jobs}
    log = drive(EGS().grow(jobs, 8), by_spec(specs, sizes))
    # 8 = 3 * 2 + 2: the two oldest (j1, j2) get 3, the youngest (j0) 2
    assert [(a.job_id, a.offer) for a, _ in log] == [("j1", 3), ("j2", 3), ("j0", 2)]


def test_egs_shrink_takes_the_malus_from_the_youngest() -> None:
    specs, jobs = _jobs(10.0, 20.0, 30.0, size=10)
    sizes = {j.id: j.size for j in jobs}
    log = drive(EGS().shrink(jobs, 7, True), by_spec(specs, sizes))
    # 7 = 3 * 2 + 1: the youngest (j2) gives 3, the others 2
    assert [(a.job_id, a.amount) for a, _ in log] == [("j2", 3), ("j1", 2), ("j0", 2)]


def test_egs_grow_with_less_than_one_each_offers_only_to_the_oldest() -> None:
    specs, jobs = _jobs(1.0, 2.0, 3.0)
    log = drive(EGS().grow(jobs, 2), by_spec(specs, {j.id: j.size for j in jobs}))
    assert [(a.job_id, a.offer) for a, _ in log] == [("j0", 1), ("j1", 1)]


def test_shrink_never_goes_below_the_minimum() -> None:
    specs, jobs = _jobs(1.0, 2.0, size=3)
    sizes = {j.id: j.size for j in jobs}
    log = drive(FPSMA().shrink(jobs, 10, True), by_spec(specs, sizes))
    assert sum(answer for _, answer in log) == 2  # each can give 1 (3 -> 2)
    assert sizes == {"j0": 2, "j1": 2}


def test_equipartition_levels_the_smallest_first() -> None:
    specs = {"a": mjob("a"), "b": mjob("b"), "c": mjob("c")}
    jobs = [running(specs["a"], 10, 1.0), running(specs["b"], 2, 2.0),
            running(specs["c"], 4, 3.0)]
    sizes = {j.id: j.size for j in jobs}
    log = drive(Equipartition().grow(jobs, 10), by_spec(specs, sizes))
    assert sizes == {"a": 10, "b": 8, "c": 8}  # never shrinks a above the level
    assert {a.job_id for a, _ in log} == {"b", "c"}


def test_equipartition_shrinks_the_largest_first() -> None:
    specs = {"a": mjob("a"), "b": mjob("b")}
    jobs = [running(specs["a"], 12, 1.0), running(specs["b"], 4, 2.0)]
    sizes = {j.id: j.size for j in jobs}
    drive(Equipartition().shrink(jobs, 9, True), by_spec(specs, sizes))
    assert sizes == {"a": 4, "b": 3}


def test_level_helpers_respect_bounds_and_tie_order() -> None:
    assert level_up([2, 2], [3, 46], 5) == [3, 6]
    assert level_up([2, 2, 2], [46] * 3, 1) == [3, 2, 2]  # oldest wins the tie
    assert level_down([5, 5], [2, 2], 1) == [5, 4]  # youngest loses the tie
    assert level_down([3, 3], [2, 2], 10) == [2, 2]
