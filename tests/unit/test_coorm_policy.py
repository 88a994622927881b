"""The CooRM RMS policy (FCFS + repeated conservative backfilling) on hand-checkable cases."""

from __future__ import annotations

from malleable.coorm.policy import Busy, Interner, Waiting, schedule
from malleable.coorm.profile import INF
from malleable.coorm.protocol import Request


def _req(duration: float, **hosts: int) -> Request:
    return Request(hosts=hosts, duration=duration)


def test_cbf_backfills_without_delaying_earlier_requests() -> None:
    # 10 hosts; 6 busy until 100. A (first) wants 8 for 50, B 4 for 100, C 4 for 150.
    waiting = [Waiting("A", ("c",), _req(50, c=8)), Waiting("B", ("c",), _req(100, c=4)),
               Waiting("C", ("c",), _req(150, c=4))]
    out = schedule(0.0, {"c": 10}, [Busy("c", 6, 100.0)], waiting, {}, Interner())
    assert out.starts == {"A": 100.0, "B": 0.0, "C": 150.0}
    # each view is the profile before its own allocation
    assert out.views["A"]["c"] == ((0.0, 4), (100.0, 10))
    assert out.views["B"]["c"] == ((0.0, 4), (100.0, 2), (150.0, 10))
    assert out.views["C"]["c"] == ((0.0, 0), (100.0, 2), (150.0, 10))
    assert out.profiles["c"].steps() == ((0.0, 0), (100.0, 2), (150.0, 6), (300.0, 10))


def test_requests_never_fail_but_may_never_start() -> None:
    waiting = [Waiting("big", ("c",), _req(10, c=11)), Waiting("small", ("c",), _req(10, c=2)),
               Waiting("quiet", ("c",), None)]
    out = schedule(5.0, {"c": 10}, [], waiting, {}, Interner())
    assert out.starts == {"big": INF, "small": 5.0}
    assert out.views["small"]["c"] == ((5.0, 10),)  # the infinite request takes nothing
    assert out.views["quiet"]["c"] == ((5.0, 8), (15.0, 10))
    # a request naming a cluster that does not exist never starts either
    out = schedule(0.0, {"c": 10}, [], [Waiting("x", ("c",), _req(1, d=1))], {}, Interner())
    assert out.starts == {"x": INF}


def test_multi_cluster_request_waits_for_a_common_hole() -> None:
    busy = [Busy("a", 4, 10.0), Busy("b", 4, 30.0)]
    waiting = [Waiting("cem", ("a", "b"), _req(20, a=4, b=2))]
    out = schedule(0.0, {"a": 4, "b": 4}, busy, waiting, {}, Interner())
    assert out.starts == {"cem": 30.0}


def test_unchanged_views_are_not_resent() -> None:
    interner = Interner()
    waiting = [Waiting("A", ("c",), _req(50, c=8)), Waiting("B", ("c",), _req(90, c=4))]
    first = schedule(0.0, {"c": 10}, [Busy("c", 6, 100.0)], waiting, {}, interner)
    again = schedule(1.0, {"c": 10}, [Busy("c", 6, 100.0)], waiting, first.versions, interner)
    assert again.views == {} and again.starts == {"A": 100.0, "B": 1.0}
    # A's request changes: B's view changes, A's does not
    moved = [Waiting("A", ("c",), _req(50, c=9)), waiting[1]]
    third = schedule(2.0, {"c": 10}, [Busy("c", 6, 100.0)], moved, again.versions, interner)
    assert set(third.views) == {"B"}


def test_placements_reused_on_unchanged_profiles_give_the_same_schedule() -> None:
    interner = Interner()
    busy = [Busy("c", 6, 100.0), Busy("d", 2, 50.0)]
    waiting = [Waiting("A", ("c", "d"), _req(50, c=8, d=1)),
               Waiting("B", ("c",), _req(90, c=4)), Waiting("C", ("d",), _req(10, d=4))]
    first = schedule(0.0, {"c": 10, "d": 4}, busy, waiting, {}, interner)
    for now in (0.5, 60.0):
        fresh = schedule(now, {"c": 10, "d": 4}, busy, waiting, {}, Interner())
        reused = schedule(now, {"c": 10, "d": 4}, busy, waiting, first.versions, interner,
                          first.placed)
        assert reused.starts == fresh.starts
        assert {c: p.steps() for c, p in reused.profiles.items()} == {
            c: p.steps() for c, p in fresh.profiles.items()}
