"""The manager's public API for a long-running service: records, health, the policy
swapped, sites added and removed, operations trimmed (none of it in a simulation's cycle)."""

from __future__ import annotations

import pytest

from malleable.errors import MalleableError
from malleable.health import SiteHealth
from malleable.manager import Manager
from malleable.model import Place, View
from tests.fakes.builders import mjob
from tests.fakes.scripted import ScriptedCluster, ScriptedPolicy


def _place_on(site: str) -> ScriptedPolicy:
    """Places every waiting job whole on ``site`` when the view shows it."""
    return ScriptedPolicy(lambda view, now: [Place(w.id, site, w.spec.min_size)
                                             for w in view.waiting if site in view.clusters])


def _seen(views: list[View]) -> ScriptedPolicy:
    def decide(view: View, now: float) -> list[Place]:
        views.append(view)
        return []
    return ScriptedPolicy(decide)


def test_an_added_site_is_observed_and_placed_on_from_the_next_cycle() -> None:
    a, b = ScriptedCluster("a"), ScriptedCluster("b")
    given = {"a": a}
    m = Manager(_place_on("b"), given)
    m.submit(mjob("j", lo=2, hi=2, init=2))
    m.cycle(0.0)
    assert m.waiting == 1
    m.add_site("b", b)
    m.cycle(1.0)
    assert m.cluster_of("j") == "b" and ("start", "j", 2) in b.calls
    assert m.sites() == ["a", "b"] and list(m.clusters) == ["a", "b"]
    assert given == {"a": a}  # the caller's mapping is not the manager's


def test_a_removed_site_is_no_longer_observed_nor_in_the_view() -> None:
    a, b = ScriptedCluster("a"), ScriptedCluster("b")
    views: list[View] = []
    m = Manager(_seen(views), {"a": a, "b": b})
    m.cycle(0.0)
    assert m.remove_site("a") is a
    before = len(a.calls)
    m.cycle(1.0)
    assert a.calls[before:] == [] and list(views[-1].clusters) == ["b"]
    assert m.sites() == ["b"] and list(m.clusters) == ["b"]


def test_a_site_running_managed_jobs_is_not_removed() -> None:
    a = ScriptedCluster("a")
    m = Manager(_place_on("a"), {"a": a})
    m.submit(mjob("j", lo=2, hi=2, init=2))
    m.cycle(0.0)
    assert m.jobs_on("a") == ["j"]
    with pytest.raises(MalleableError, match="still runs 1 managed job"):
        m.remove_site("a")
    with pytest.raises(MalleableError, match="already managed"):
        m.add_site("a", a)
    assert m.sites() == ["a"]


def test_health_follows_the_sites_added_and_removed() -> None:
    a, b = ScriptedCluster("a"), ScriptedCluster("b")
    m = Manager(_seen([]), {"a": a})
    m.site_health("a")
    health = SiteHealth("b")
    m.add_site("b", b, health)
    assert m.health_of("b") is health
    m.remove_site("a")
    assert m.health_of("a") is None and m.health_of("b") is health


def test_records_policy_and_operations_through_the_api() -> None:
    a = ScriptedCluster("a")
    m = Manager(_seen([]), {"a": a})
    m.submit(mjob("j", lo=2, hi=2, init=2))
    record = m.record("j")
    assert record is not None and record.spec.id == "j" and m.record("k") is None
    assert list(m.job_records()) == ["j"]
    with pytest.raises(TypeError):
        m.job_records()["k"] = record  # type: ignore[index]
    m.set_policy(_place_on("a"))
    m.cycle(0.0)
    assert m.cluster_of("j") == "a"
    for i in range(5):
        m.submit(mjob(f"x{i}", lo=1, hi=1, init=1))
    m.cycle(1.0)
    assert len(m.operations) == 6
    m.trim_operations(2, above=10)
    assert len(m.operations) == 6
    m.trim_operations(2, above=5)
    assert [op.job_id for op in m.operations] == ["x3", "x4"]
