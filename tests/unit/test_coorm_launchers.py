"""Launchers: selection on a view, memoization, the CEM model and heuristic."""

from __future__ import annotations

import pytest

from malleable.coorm.launchers import Launcher
from malleable.coorm.profile import Profile
from malleable.coorm.protocol import AVAILABILITY, Change
from malleable.coorm.resources import paper_platform, wan_latency
from malleable.coorm.selection import best_single_cluster, cem_select
from malleable.workloads.coorm_apps import Amdahl, Cem, Rigid


def _launcher(app: Rigid | Amdahl | Cem, n_clusters: int = 2, hosts: int = 8) -> Launcher:
    platform = paper_platform(n_clusters, hosts)
    launcher = Launcher("x", app)
    launcher.set_clusters(platform.clusters)
    launcher.set_links(platform.links)
    return launcher


def test_rigid_picks_the_cluster_where_it_ends_first() -> None:
    launcher = _launcher(Rigid(4, 100.0, 110.0))
    # c1 (speed 1) free now; c2 (speed 1.1) free from 5: 5 + 100 < 110
    launcher.apply([Change("c1", AVAILABILITY, ((0.0, 8),)),
                    Change("c2", AVAILABILITY, ((0.0, 0), (5.0, 8)))])
    req = launcher.next_request()
    assert req is not None and dict(req.hosts) == {"c2": 4}
    assert req.duration == pytest.approx(100.0)
    assert launcher.next_request() is None  # same view, same request: nothing to send
    assert launcher.stats.computed == 1 and launcher.stats.reused == 1


def test_amdahl_trades_hosts_for_an_earlier_start() -> None:
    app = Amdahl(4, 100.0, 100.0, serial=0.0)  # 400 host-seconds
    launcher = _launcher(app, n_clusters=1)
    # 2 hosts now, 8 from 60: 2 hosts end at 200, 8 hosts end at 60 + 50 = 110
    launcher.apply([Change("c1", AVAILABILITY, ((0.0, 2), (60.0, 8)))])
    req = launcher.next_request()
    assert req is not None and dict(req.hosts) == {"c1": 8}
    # 6 hosts now: 400 / 6 = 66.7 ends before 110
    launcher.apply([Change("c1", AVAILABILITY, ((1.0, 6), (60.0, 8)))])
    req = launcher.next_request()
    assert req is not None and dict(req.hosts) == {"c1": 6}
    assert launcher.stats.computed == 2
    assert launcher.runtime({"c1": 6}) == pytest.approx(400 / 6)


def test_memo_answers_a_view_seen_before() -> None:
    launcher = _launcher(Rigid(2, 10.0, 10.0))
    a = ((0.0, 8),)
    b = ((0.0, 1), (50.0, 8))
    for cap in (a, b, a, b):
        launcher.apply([Change("c1", AVAILABILITY, cap), Change("c2", AVAILABILITY, cap)])
        launcher.choose()
    assert (launcher.stats.computed, launcher.stats.reused) == (2, 2)


def test_moldable_selection_counts_every_configuration() -> None:
    platform = paper_platform(3, 16)
    profiles = {c.cid: Profile(16) for c in platform.clusters}
    choice = best_single_cluster(Amdahl(4, 100.0, 100.0, 0.1), profiles, platform,
                                 platform.ids, 0.0)
    assert choice.evaluated == 3 * 16
    assert dict(choice.hosts) == {"c3": 16}  # fastest cluster, all hosts


def test_wan_latency_is_hierarchical() -> None:
    assert wan_latency(0, 0) == 0.0
    assert wan_latency(0, 1) < wan_latency(0, 2) < wan_latency(0, 4) < wan_latency(0, 8)
    platform = paper_platform(8)
    assert [c.speed for c in platform.clusters] == pytest.approx(
        [1 + 0.1 * i for i in range(8)])
    assert platform.latency("c1", "c2") == platform.latency("c2", "c1") == 0.001


def test_cem_model_rewards_more_hosts_and_penalises_the_wan() -> None:
    platform = paper_platform(8)
    cem = Cem.like(128, 5400.0)
    one = cem.runtime({"c1": 128}, platform)
    assert one == pytest.approx(5400.0, rel=0.02)
    assert cem.runtime({"c8": 128}, platform) == pytest.approx(one / 1.7, rel=0.02)
    near = cem.runtime({"c1": 128, "c2": 128}, platform)
    far = cem.runtime({"c1": 128, "c8": 128}, platform)
    assert near < one and near < far  # c2 is slower than c8 but much closer
    with pytest.raises(ValueError):
        Cem(work=0.0, iterations=1)


def test_cem_heuristic_spans_free_clusters_and_waits_when_worth_it() -> None:
    platform = paper_platform(2, 16)
    cem = Cem.like(16, 1000.0)
    free = {c: Profile(16) for c in platform.ids}
    choice = cem_select(cem, free, platform, platform.ids, 0.0)
    assert dict(choice.hosts) == {"c1": 16, "c2": 16} and choice.start == 0.0
    # c2 busy for a long time: c1 alone now
    busy = {"c1": Profile(16), "c2": Profile.from_steps(16, [(0.0, 0), (1e6, 16)])}
    choice = cem_select(cem, busy, platform, platform.ids, 0.0)
    assert dict(choice.hosts) == {"c1": 16}
    # only 1 host free on c1 now, everything free at 10: waiting wins
    soon = {c: Profile.from_steps(16, [(0.0, 1), (10.0, 16)]) for c in platform.ids}
    choice = cem_select(cem, soon, platform, platform.ids, 0.0)
    assert choice.start == 10.0 and sum(choice.hosts.values()) == 32
    assert choice.evaluated > 0


def test_cem_launcher_runtime_matches_its_request() -> None:
    launcher = _launcher(Cem.like(8, 100.0, per_iteration=1.0))
    launcher.apply([Change("c1", AVAILABILITY, ((0.0, 8),)),
                    Change("c2", AVAILABILITY, ((0.0, 8),))])
    req = launcher.next_request()
    assert req is not None
    assert launcher.runtime(req.hosts) == req.duration


def test_bad_models_are_refused() -> None:
    with pytest.raises(ValueError):
        Rigid(0, 1.0, 1.0)
    with pytest.raises(ValueError):
        Rigid(1, 2.0, 1.0)
    with pytest.raises(ValueError):
        Amdahl(1, 1.0, 1.0, serial=1.5)
    with pytest.raises(ValueError):
        Launcher("x", Rigid(1, 1.0, 1.0), adaptation_delay=-1.0)
