"""The simulated cluster: work preserved across resizes, costs, releases, events."""

from __future__ import annotations

import pytest

from malleable.model import JobKind, JobSpec, JobState
from malleable.sim.cluster import SimCluster
from malleable.sim.engine import Engine


def _gadget(job_id: str = "g") -> JobSpec:
    return JobSpec(job_id, JobKind.MALLEABLE, 2, 46, 2, app="gadget2")


def _ended_at(engine: Engine, cluster: SimCluster) -> dict[str, float]:
    engine.run()
    return {e.job_id: e.time for e in cluster.drain_events() if e.state.finished}


def test_a_job_alone_takes_its_model_time() -> None:
    engine = Engine()
    c = SimCluster("c", 10, engine)
    c.start(_gadget(), 2)
    assert _ended_at(engine, c) == {"g": pytest.approx(600.0)}


def test_work_is_preserved_across_a_grow() -> None:
    engine = Engine()
    c = SimCluster("c", 10, engine)
    c.start(_gadget(), 2)
    engine.at(300.0, lambda: c.offer_grow("g", 4))  # half done at 2, then on 6 nodes
    # T(6) = 240 + 120 = 360 s for the whole job: the other half takes 180 s
    assert _ended_at(engine, c) == {"g": pytest.approx(480.0)}


def test_reconfiguration_cost_pauses_progress() -> None:
    engine = Engine()
    c = SimCluster("c", 10, engine, reconfig_cost=20.0)
    c.start(_gadget(), 2)
    engine.at(300.0, lambda: c.offer_grow("g", 4))
    assert _ended_at(engine, c) == {"g": pytest.approx(500.0)}


def test_released_nodes_are_not_idle_before_the_release_delay() -> None:
    engine = Engine()
    c = SimCluster("c", 10, engine, release_delay=5.0)
    c.start(_gadget(), 8)
    seen: dict[str, int] = {}

    def shrink() -> None:
        assert c.request_shrink("g", 3, True) == 3
        seen["idle_now"] = c.idle
        view = c.observe().running["g"]
        seen["releasing"] = view.releasing

    engine.at(10.0, shrink)
    engine.at(12.0, lambda: seen.setdefault("idle_2s_later", c.idle))
    engine.at(16.0, lambda: seen.setdefault("idle_after", c.idle))
    engine.run()
    assert seen == {"idle_now": 2, "releasing": 3, "idle_2s_later": 2, "idle_after": 5}


def test_events_report_start_resize_and_end() -> None:
    engine = Engine()
    c = SimCluster("c", 10, engine)
    c.start(_gadget(), 2)
    engine.at(100.0, lambda: c.offer_grow("g", 3))
    engine.run()
    events = [(e.time, e.state, e.size) for e in c.drain_events()]
    assert events[0] == (0.0, JobState.RUNNING, 2)
    assert events[1] == (100.0, JobState.RUNNING, 5)
    assert events[2][1] is JobState.COMPLETED


def test_grow_never_takes_more_than_idle_and_rigid_jobs_do_not_grow() -> None:
    engine = Engine()
    c = SimCluster("c", 6, engine)
    c.start(_gadget(), 4)
    assert c.offer_grow("g", 10) == 2
    r = JobSpec("r", JobKind.RIGID, 1, 1, 1, app="fixed", runtime=5.0)
    assert c.start(r, 1) == 0  # no idle node left
    assert c.offer_grow("r", 1) == 0
    assert c.start(_gadget("x"), 7) == 0


def test_a_view_never_changes_after_starts_ends_and_resizes() -> None:
    """Each view's running jobs are a copy, in start order: later starts, ends (which leave
    deleted slots in the cluster's own table) and resizes show only in later views."""
    engine = Engine()
    c = SimCluster("c", 40, engine)
    views = [c.observe()]
    for i in range(6):
        c.start(_gadget(f"g{i}"), 2)
        views.append(c.observe())
    c.cancel("g1")
    c.cancel("g3")
    views.append(c.observe())
    c.offer_grow("g4", 4)
    c.start(_gadget("g6"), 2)
    views.append(c.observe())
    running = [{j: v.size for j, v in view.running.items()} for view in views]
    assert running[:7] == [{f"g{i}": 2 for i in range(k)} for k in range(7)]
    assert running[7] == {"g0": 2, "g2": 2, "g4": 2, "g5": 2}
    assert running[8] == {"g0": 2, "g2": 2, "g4": 6, "g5": 2, "g6": 2}
    assert [list(r) for r in running[7:]] == [["g0", "g2", "g4", "g5"],
                                              ["g0", "g2", "g4", "g5", "g6"]]
    assert views[7].idle == 32 and views[8].idle == 26


def test_a_view_never_changes_when_the_cluster_remakes_its_table() -> None:
    """Once the ended jobs' deleted slots may reach a third of the table, the cluster writes
    a new, compact table and the view keeps the old one: both earlier and later views stay
    as they were (issue 17, docs/notes/issue-17-speed13.md)."""
    engine = Engine()
    c = SimCluster("c", 40, engine)
    for i in range(8):
        c.start(_gadget(f"g{i}"), 2)
    before = c.observe()
    for i in range(5):  # 5 deleted of 8: the table is remade at the next view
        c.cancel(f"g{i}")
    remade = c.observe()
    c.start(_gadget("h"), 2)
    c.cancel("g5")
    after = c.observe()
    c.cancel("g6")
    c.offer_grow("h", 2)
    last = c.observe()
    assert list(before.running) == [f"g{i}" for i in range(8)]
    assert list(remade.running) == ["g5", "g6", "g7"]
    assert list(after.running) == ["g6", "g7", "h"]
    assert {j: v.size for j, v in last.running.items()} == {"g7": 2, "h": 4}
    assert after.running["h"].size == 2 and remade.idle == 34 and last.idle == 34
