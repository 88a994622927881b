"""PRA, PWA and no-malleability on small views that can be checked by hand."""

from __future__ import annotations

from malleable.model import Defer, Grow, Place, Reject, Shrink, View, WaitingJob
from malleable.policies.koala import KoalaPolicy, start_size
from tests.fakes.builders import by_spec, cluster, drive, mjob, rigid, running


def _decide(policy: KoalaPolicy, view: View, specs: dict, sizes: dict) -> list:
    return drive(policy.decide(view, view.time), by_spec(specs, sizes))


def test_worst_fit_places_on_the_cluster_with_most_idle_nodes() -> None:
    a = mjob("a")
    view = View(0.0, {"small": cluster("small", 8), "big": cluster("big", 20)}, [WaitingJob(a)])
    log = _decide(KoalaPolicy.named("none", "fpsma"), view, {"a": a}, {})
    assert log == [(Place("a", "big", 2), 2)]


def test_reserve_is_never_used() -> None:
    a = rigid("a", size=4)
    view = View(0.0, {"c": cluster("c", 10, reserve=3, idle=5)}, [WaitingJob(a)])
    log = _decide(KoalaPolicy.named("none", "fpsma"), view, {"a": a}, {})
    assert log == [(Defer("a"), None)]  # 5 idle but only 2 outside the reserve
    view = View(0.0, {"c": cluster("c", 6, reserve=3)}, [WaitingJob(a)])
    log = _decide(KoalaPolicy.named("none", "fpsma"), view, {"a": a}, {})
    assert isinstance(log[0][0], Reject)  # 4 > 6 - 3: can never fit


def test_pra_grows_running_jobs_before_placing_waiting_malleable_ones() -> None:
    old, new = mjob("old"), mjob("new")
    view = View(5.0, {"c": cluster("c", 20, [running(old, 2, 0.0)])}, [WaitingJob(new)])
    sizes = {"old": 2}
    log = _decide(KoalaPolicy.named("pra", "fpsma"), view, {"old": old, "new": new}, sizes)
    # 18 idle: old takes all 18 (max 46), nothing is left for the waiting job
    assert log == [(Grow("old", 18), 18), (Defer("new"), None)]


def test_pra_keeps_malleable_jobs_waiting_while_a_running_job_can_still_grow() -> None:
    old = mjob("old", hi=12)
    new = mjob("new")
    view = View(5.0, {"c": cluster("c", 20, [running(old, 12, 0.0)])}, [WaitingJob(new)])
    log = _decide(KoalaPolicy.named("pra", "egs"), view, {"old": old, "new": new}, {"old": 12})
    # old is at its maximum: it cannot grow, so the waiting job is placed
    assert log == [(Place("new", "c", 2), 2)]


def test_pra_places_rigid_jobs_in_what_growth_leaves() -> None:
    ft = mjob("ft", hi=32, init=2)
    r = rigid("r", size=2)
    view = View(1.0, {"c": cluster("c", 10, [running(ft, 8, 0.0)])}, [WaitingJob(r)])
    log = _decide(KoalaPolicy.named("pra", "fpsma"), view, {"ft": ft, "r": r}, {"ft": 8})
    assert log == [(Grow("ft", 2), 2), (Defer("r"), None)]


def test_pwa_shrinks_mandatorily_to_make_room_for_the_next_job() -> None:
    a, b, w = mjob("a"), mjob("b"), mjob("w", lo=6, init=6)
    view = View(9.0, {"c": cluster("c", 20, [running(a, 10, 1.0), running(b, 10, 2.0)])},
                [WaitingJob(w)])
    sizes = {"a": 10, "b": 10}
    log = _decide(KoalaPolicy.named("pwa", "fpsma"), view, {"a": a, "b": b, "w": w}, sizes)
    # no idle node: the youngest (b) is asked for the 6 missing nodes
    assert log == [(Defer("w"), None), (Shrink("b", 6, True), 6)]


def test_pwa_waits_for_nodes_already_being_released() -> None:
    a, w = mjob("a"), mjob("w", lo=6, init=6)
    view = View(9.0, {"c": cluster("c", 20, [running(a, 20, 1.0, releasing=6)])},
                [WaitingJob(w)])
    log = _decide(KoalaPolicy.named("pwa", "egs"), view, {"a": a, "w": w}, {"a": 20})
    assert log == [(Defer("w"), None)]


def test_pwa_grows_when_even_minimum_sizes_cannot_make_room() -> None:
    a, w = mjob("a"), rigid("w", size=12)
    view = View(9.0, {"c": cluster("c", 12, [running(a, 4, 1.0)])}, [WaitingJob(w)])
    log = _decide(KoalaPolicy.named("pwa", "fpsma"), view, {"a": a, "w": w}, {"a": 4})
    # shrinking a to its minimum (2) frees 2 + 8 idle = 10 < 12: grow a instead
    assert log == [(Defer("w"), None), (Grow("a", 8), 8)]


def test_none_never_grows_or_shrinks() -> None:
    a = mjob("a")
    view = View(0.0, {"c": cluster("c", 30, [running(a, 2, 0.0)])}, [])
    assert _decide(KoalaPolicy.named("none", "egs"), view, {"a": a}, {"a": 2}) == []


def test_jobs_larger_than_every_cluster_are_rejected() -> None:
    big = rigid("big", size=50)
    view = View(0.0, {"c": cluster("c", 46)}, [WaitingJob(big)])
    log = _decide(KoalaPolicy.named("pra", "fpsma"), view, {"big": big}, {})
    assert isinstance(log[0][0], Reject)


def test_start_size_by_kind() -> None:
    assert start_size(mjob("m", init=4), 3) == 3
    assert start_size(mjob("m", init=4), 1) == 0
    assert start_size(rigid("r", 4), 10) == 4
