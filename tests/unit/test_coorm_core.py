"""The CooRM RMS state machine: re-policy interval, fair-start, kills, errors."""

from __future__ import annotations

from malleable.coorm.core import CooRMCore, CoreConfig, Outgoing, same_future
from malleable.coorm.protocol import (
    ChangeNotify,
    ClustersInfo,
    Done,
    Error,
    Filter,
    InterClusterInfo,
    KillNotify,
    ListClustersInfo,
    ListInterClusterInfo,
    Message,
    Request,
    StartNotify,
    Subscribe,
    Subscribed,
)
from malleable.coorm.resources import paper_platform


def _of(out: list[Outgoing], kind: type[Message]) -> list[tuple[str, Message]]:
    return [(a, m) for a, m in out if isinstance(m, kind)]


def _core(interval: float = 1.0, fair: float = 5.0, grace: float = 0.0) -> CooRMCore:
    return CooRMCore(paper_platform(2, 10), CoreConfig(interval, fair, grace))


def test_subscribe_info_and_first_view() -> None:
    core = _core()
    a = core.subscribe(Subscribe(filter=Filter(clusters=("c2",)), name="x"), 0.0)
    core.handle(a, ListClustersInfo(), 0.0)
    core.handle(a, ListInterClusterInfo(), 0.0)
    out = core.advance(0.0)
    assert [type(m) for _, m in out] == [Subscribed, ClustersInfo, InterClusterInfo, ChangeNotify]
    info = _of(out, ClustersInfo)[0][1]
    assert isinstance(info, ClustersInfo) and [c.cid for c in info.clusters] == ["c2"]
    view = _of(out, ChangeNotify)[0][1]
    assert isinstance(view, ChangeNotify)
    assert [(c.cid, c.cap) for c in view.changes] == [("c2", ((0.0, 10),))]


def test_policy_runs_at_most_once_per_interval() -> None:
    core = _core(interval=1.0)
    a = core.subscribe(Subscribe(), 0.0)
    core.advance(0.0)
    assert core.stats.policy_runs == 1
    core.handle(a, Request(hosts={"c1": 4}, duration=10.0), 0.2)
    b = core.subscribe(Subscribe(), 0.4)
    assert core.advance(0.5) == [(b, Subscribed(app=b))]  # coalesced: no run yet
    assert core.next_wakeup() == 1.0
    out = core.advance(1.0)
    assert core.stats.policy_runs == 2
    assert _of(out, StartNotify)[0][0] == a
    assert {x for x, _ in _of(out, ChangeNotify)} == {b}


def test_fair_start_keeps_hosts_after_done() -> None:
    core = _core(interval=0.0, fair=5.0)
    a = core.subscribe(Subscribe(), 0.0)
    core.advance(0.0)
    core.handle(a, Request(hosts={"c1": 10}, duration=100.0), 0.0)
    assert _of(core.advance(0.0), StartNotify)
    b = core.subscribe(Subscribe(), 1.0)
    core.advance(1.0)
    core.handle(b, Request(hosts={"c1": 10}, duration=10.0), 1.0)
    assert not _of(core.advance(1.0), StartNotify)
    core.handle(a, Done(), 20.0)
    out = core.advance(20.0)
    view = _of(out, ChangeNotify)[0][1]
    assert isinstance(view, ChangeNotify)
    assert view.changes[0].cap == ((20.0, 0), (25.0, 10))  # held until 25
    assert not _of(out, StartNotify)
    assert core.next_wakeup() == 25.0
    assert not _of(core.advance(24.9), StartNotify)
    started = _of(core.advance(25.0), StartNotify)
    assert started and started[0][0] == b


def test_fair_start_never_extends_an_allocation() -> None:
    core = _core(interval=0.0, fair=5.0)
    a = core.subscribe(Subscribe(), 0.0)
    core.advance(0.0)
    core.handle(a, Request(hosts={"c1": 10}, duration=10.0), 0.0)
    core.advance(0.0)
    core.handle(a, Done(), 8.0)
    core.advance(8.0)
    assert [h.release for h in core.holds] == [10.0]


def test_overrunning_application_is_killed() -> None:
    core = _core(interval=0.0, fair=5.0, grace=2.0)
    a = core.subscribe(Subscribe(), 0.0)
    core.advance(0.0)
    core.handle(a, Request(hosts={"c1": 3}, duration=10.0), 0.0)
    core.advance(0.0)
    assert core.next_wakeup() == 12.0
    assert not _of(core.advance(11.9), KillNotify)
    killed = _of(core.advance(12.0), KillNotify)
    assert killed == [(a, KillNotify(reason="allocation time exceeded"))]
    assert len(core.free["c1"]) == 10 and core.stats.kills == 1


def test_bad_requests_are_answered_with_errors() -> None:
    core = _core()
    a = core.subscribe(Subscribe(filter=Filter(clusters=("c1",))), 0.0)
    core.handle(a, Request(hosts={"c2": 1}, duration=5.0), 0.0)
    core.handle("nobody", Done(), 0.0)
    errors = _of(core.advance(0.0), Error)
    assert [x for x, _ in errors] == [a, "nobody"]
    assert "outside the subscription" in str(errors[0][1])


def test_a_request_larger_than_the_platform_waits_forever() -> None:
    core = _core(interval=0.0)
    a = core.subscribe(Subscribe(), 0.0)
    b = core.subscribe(Subscribe(), 0.0)
    core.advance(0.0)
    core.handle(a, Request(hosts={"c1": 11}, duration=5.0), 0.0)
    core.handle(b, Request(hosts={"c1": 10}, duration=5.0), 0.0)
    started = [x for x, _ in _of(core.advance(0.0), StartNotify)]
    assert started == [b]
    assert core.apps[a].state == "waiting" and core.apps[a].planned == float("inf")
    assert core.next_wakeup() == 5.0  # b's allocation end, nothing for a


def test_a_new_view_delays_a_start_to_the_next_run() -> None:
    core = _core(interval=1.0, fair=0.0)
    a = core.subscribe(Subscribe(), 0.0)
    core.advance(0.0)
    core.handle(a, Request(hosts={"c1": 10}, duration=100.0), 0.0)
    core.advance(1.0)  # a starts at 1
    b = core.subscribe(Subscribe(), 2.0)
    core.advance(2.0)
    core.handle(b, Request(hosts={"c1": 5}, duration=10.0), 2.0)
    core.handle(a, Done(), 50.0)
    out = core.advance(50.0)  # b's request fits now, but b gets the new view first
    assert _of(out, ChangeNotify) and not _of(out, StartNotify)
    assert _of(core.advance(51.0), StartNotify)


def test_disconnect_of_running_app_releases_like_done() -> None:
    core = _core(interval=0.0, fair=3.0)
    a = core.subscribe(Subscribe(), 0.0)
    core.advance(0.0)
    core.handle(a, Request(hosts={"c2": 2}, duration=10.0), 0.0)
    core.advance(0.0)
    core.disconnect(a, 4.0)
    core.advance(4.0)
    assert [h.release for h in core.holds] == [7.0]


def test_same_future() -> None:
    old = ((0.0, 0), (5.0, 10), (9.0, 4))
    assert same_future(old, ((5.0, 10), (9.0, 4)))
    assert same_future(old, ((6.0, 10), (9.0, 4)))
    assert not same_future(old, ((6.0, 10), (9.0, 5)))
    assert not same_future(old, ((4.0, 10), (9.0, 4)))
    assert not same_future(((3.0, 1),), ((2.0, 1),))
