"""The ResourceManager contract, one body run on every implementation (see conftest.py).

What an implementation cannot do (a capability it does not declare, a world it cannot
stage) is skipped with the reason, never weakened.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from malleable.model import ClusterView, JobState
from malleable.resources import Capability, ResourceManager
from tests.fakes.drivers import STATES_AFTER_CANCEL, Driver


def needs(driver: Driver, capability: Capability) -> None:
    if capability not in driver.rm.capabilities:
        why = getattr(driver.rm, "missing", {}).get(capability.name, "")  # the adapter's reason
        pytest.skip(f"{driver.kind} does not declare {capability.name}"
                    + (f": {why}" if why else ""))


def started(driver: Driver, job_id: str, size: int = 2, **kw: Any) -> int:
    """Start a job and wait until a view shows it running; the size granted."""
    granted = driver.rm.start(driver.spec(job_id, size, **kw), size)
    assert 0 < granted <= size
    driver.wait(lambda: job_id in driver.rm.observe().running, f"{job_id} to run")
    return granted


def frozen(view: ClusterView) -> tuple[Any, ...]:
    """Everything a view says, copied out of its mappings."""
    jobs = {k: (j, dict(j.feedback)) for k, j in view.running.items()}
    return (view.name, view.nodes, view.idle, view.reserve, jobs, view.pending, view.speed)


# ------------------------------------------------------------------ identity


def test_is_a_resource_manager_with_a_name_and_declared_capabilities(driver: Driver) -> None:
    rm = driver.rm
    assert isinstance(rm, ResourceManager)
    assert isinstance(rm.name, str) and rm.name
    assert isinstance(rm.capabilities, frozenset)
    assert all(isinstance(c, Capability) for c in rm.capabilities)
    view = rm.observe()
    assert (view.name, view.nodes, view.idle) == (rm.name, driver.nodes, driver.nodes)
    assert view.running == {} and list(rm.drain_events()) == []


# ------------------------------------------------------------------ start


def test_start_grants_at_most_the_size_and_the_next_views_show_the_job(driver: Driver) -> None:
    granted = driver.rm.start(driver.spec("a", 2), 2)
    assert 0 <= granted <= 2
    if granted == 0:
        pytest.fail(f"{driver.kind} refused a 2-node job on {driver.nodes} idle nodes")
    driver.wait(lambda: "a" in driver.rm.observe().running, "a to run")
    job = driver.rm.observe().running["a"]
    assert (job.id, job.size, job.managed, job.cluster) == ("a", granted, True, driver.rm.name)
    assert driver.rm.observe().idle == driver.nodes - granted
    start = [e for e in driver.seen if e.job_id == "a"]
    assert [(e.state, e.size) for e in start] == [(JobState.RUNNING, granted)]


def test_start_of_nothing_is_refused(driver: Driver) -> None:
    assert driver.rm.start(driver.spec("z", 1), 0) == 0
    driver.tick()
    assert "z" not in driver.rm.observe().running and driver.drain() == []


def test_start_beyond_the_cluster_grants_at_most_the_size_and_never_runs(
        driver: Driver) -> None:
    size = driver.nodes + 1
    granted = driver.rm.start(driver.spec("big", size, high=size), size)
    assert 0 <= granted <= size
    driver.tick()
    driver.drain()
    assert "big" not in driver.rm.observe().running
    assert not any(e.job_id == "big" and e.state is JobState.RUNNING for e in driver.seen)


# ------------------------------------------------------------------ grow and shrink


def test_grow_accepts_at_most_the_offer_and_the_next_views_show_it(driver: Driver) -> None:
    needs(driver, Capability.EXPAND)
    before = started(driver, "a", 2)
    driver.drain()  # whatever the adapter has seen so far (it may poll for it)
    accepted = driver.rm.offer_grow("a", 1)
    assert 0 <= accepted <= 1
    assert driver.size_of("a") == before + accepted  # the very next view
    driver.tick()
    driver.drain()
    assert driver.size_of("a") == before + accepted  # and it stays
    if accepted:
        assert driver.seen[-1].job_id == "a" and driver.seen[-1].size == before + accepted


def test_grow_of_a_rigid_or_unknown_job_accepts_nothing(driver: Driver) -> None:
    needs(driver, Capability.EXPAND)
    started(driver, "r", 2, malleable=False)
    assert driver.rm.offer_grow("r", 1) == 0
    assert driver.rm.offer_grow("nobody", 1) == 0
    driver.tick()
    assert driver.size_of("r") == 2


def test_shrink_releases_at_most_the_amount_and_the_next_views_show_it(
        driver: Driver) -> None:
    needs(driver, Capability.SHRINK)
    before = started(driver, "a", 3)
    released = driver.rm.request_shrink("a", 1, False)
    assert 0 <= released <= 1
    driver.wait_size("a", before - released)
    driver.wait(lambda: driver.rm.observe().idle == driver.nodes - before + released,
                "the released node to be idle")


def test_a_mandatory_shrink_is_bounded_by_the_amount_and_the_minimum(driver: Driver) -> None:
    needs(driver, Capability.SHRINK)
    before = started(driver, "a", 3, low=2)
    released = driver.rm.request_shrink("a", 2, True)
    assert 0 <= released <= 1  # minimum 2
    driver.wait_size("a", before - released)
    assert driver.rm.request_shrink("nobody", 1, True) == 0


@pytest.mark.parametrize("missing", [Capability.SHRINK, Capability.EXPAND])
def test_an_undeclared_capability_is_not_used(driver: Driver, missing: Capability) -> None:
    before = started(driver, "a", 2)
    driver.declare(driver.rm.capabilities - {missing})
    assert missing not in driver.rm.capabilities
    if missing is Capability.SHRINK:
        assert driver.rm.request_shrink("a", 1, True) == 0
    else:
        assert driver.rm.offer_grow("a", 1) == 0
    driver.tick()
    assert driver.size_of("a") == before


def test_feedback_comes_only_from_a_resource_manager_that_declares_it(driver: Driver) -> None:
    started(driver, "a", 2)
    job = driver.rm.observe().running["a"]
    if Capability.FEEDBACK not in driver.rm.capabilities:
        assert dict(job.feedback) == {}
    assert all(isinstance(k, str) and isinstance(v, float) for k, v in job.feedback.items())


# ------------------------------------------------------------------ ends


def test_cancel_ends_the_job_in_a_finished_state_that_is_not_completed(driver: Driver) -> None:
    started(driver, "a", 2)
    driver.rm.cancel("a")
    end = driver.wait_end("a")
    assert end.state in STATES_AFTER_CANCEL and end.state is not JobState.COMPLETED
    driver.wait(lambda: "a" not in driver.rm.observe().running, "a to leave the view")
    driver.wait(lambda: driver.rm.observe().idle == driver.nodes, "every node idle")


def test_cancel_of_an_unknown_or_finished_job_is_harmless(driver: Driver) -> None:
    driver.rm.cancel("nobody")
    started(driver, "a", 1)
    driver.rm.cancel("a")
    driver.wait_end("a")
    driver.rm.cancel("a")
    driver.tick()
    driver.drain()
    assert [e.state.finished for e in driver.seen if e.job_id == "a"] == [False, True]


def test_a_job_that_vanishes_without_a_known_end_is_never_completed(driver: Driver) -> None:
    started(driver, "a", 2)
    driver.vanish("a")
    end = driver.wait_end("a")
    assert end.state.finished and end.state is not JobState.COMPLETED
    assert end.reason  # says why


# ------------------------------------------------------------------ views and events


def test_a_view_never_changes_afterwards(driver: Driver) -> None:
    started(driver, "a", 2)
    view = driver.rm.observe()
    before = frozen(view)
    with pytest.raises(dataclasses.FrozenInstanceError):
        view.idle = 0  # type: ignore[misc]
    with pytest.raises(TypeError):
        view.running["x"] = view.running["a"]  # type: ignore[index]
    with pytest.raises(TypeError):
        del view.running["a"]  # type: ignore[attr-defined]
    with pytest.raises(dataclasses.FrozenInstanceError):
        view.running["a"].size = 99  # type: ignore[misc]
    started(driver, "b", 1)
    assert frozen(driver.rm.observe()) != before  # the world changed: b runs
    if Capability.EXPAND in driver.rm.capabilities:
        driver.rm.offer_grow("a", 1)
    if Capability.SHRINK in driver.rm.capabilities:
        driver.rm.request_shrink("b", 1, False)
    driver.rm.cancel("b")
    driver.wait_end("b")
    assert frozen(view) == before
    if Capability.EXPAND in driver.rm.capabilities:  # a grew
        assert frozen(driver.rm.observe()) != before


def test_events_come_oldest_first_and_each_only_once(driver: Driver) -> None:
    started(driver, "a", 1)
    started(driver, "b", 1)
    if Capability.EXPAND in driver.rm.capabilities:
        driver.rm.offer_grow("a", 1)
    driver.rm.cancel("b")
    driver.wait_end("b")
    driver.rm.cancel("a")
    driver.wait_end("a")
    driver.tick()
    driver.drain()
    assert list(driver.rm.drain_events()) == []
    times = [e.time for e in driver.seen]
    assert times == sorted(times)
    assert len(set(driver.seen)) == len(driver.seen)
    for job_id in ("a", "b"):
        states = [e.state for e in driver.seen if e.job_id == job_id]
        assert states[0] is JobState.RUNNING and states[-1].finished
        assert sum(s.finished for s in states) == 1


def test_close_is_safe_and_idempotent_and_jobs_keep_running(driver: Driver) -> None:
    started(driver, "a", 2)
    driver.rm.close()
    driver.rm.close()
    assert driver.size_of("a") == 2  # the adapter reconnects; the job was not ended
    assert not any(e.state.finished for e in driver.drain())


def test_draining_nodes_or_sites(driver: Driver) -> None:
    assert not hasattr(driver.rm, "drain")
    pytest.skip("ResourceManager has no verb to drain nodes or a site (only drain_events); "
                "nothing to check until one exists")
