"""The hierarchical policy on hand-built views: feedback, fallback, quanta, placement."""

from __future__ import annotations

import pytest

from malleable.errors import InputError
from malleable.model import (
    ClusterView,
    Defer,
    Grow,
    JobSpec,
    Place,
    Reject,
    RunningJob,
    Shrink,
    View,
    WaitingJob,
)
from malleable.policies.hierarchical.config import TreeConfig
from malleable.policies.hierarchical.policy import HierarchicalPolicy
from malleable.policies.registry import make
from tests.fakes.builders import cluster, drive, mjob


def _run(spec: JobSpec, size: int, start: float = 0.0, cluster_name: str = "a",
         **feedback: float) -> RunningJob:
    return RunningJob(spec, cluster_name, size, start, True, 0, 0, feedback)


def _spec(job_id: str, lo: int = 1, hi: int = 46, group: str = "g", user: str = "") -> JobSpec:
    s = mjob(job_id, lo, hi, lo)
    return JobSpec(s.id, s.kind, lo, hi, lo, app=s.app, group=group, user=user)


def _view(now: float, *clusters: ClusterView, waiting: tuple[JobSpec, ...] = ()) -> View:
    return View(now, {c.name: c for c in clusters}, tuple(WaitingJob(w) for w in waiting))


def _actions(policy: HierarchicalPolicy, view: View, answer=None) -> list:
    answer = answer or (lambda a: a.offer if isinstance(a, Grow) else a.size
                        if isinstance(a, Place) else getattr(a, "amount", None))
    return [a for a, _ in drive(policy.decide(view, view.time), answer)]


def _policy(**options: object) -> HierarchicalPolicy:
    return HierarchicalPolicy(TreeConfig.from_mapping({"quantum": 10.0, **options}))


def test_a_control_feedback_drives_deq_then_grows_wait_for_released_nodes() -> None:
    j1, j2, j3 = _spec("j1"), _spec("j2"), _spec("j3")
    policy = _policy()
    jobs = [_run(j1, 4, 1.0, parallelism=10.0), _run(j2, 20, 2.0, parallelism=2.0),
            _run(j3, 8, 3.0, parallelism=30.0)]
    # 32 nodes, all busy. DEQ: 2 and 10 fit the share 32/3; 20 left for the 30-wanter.
    assert _actions(policy, _view(0.0, cluster("a", 32, jobs))) == [Shrink("j2", 18, True)]
    assert policy._alloc[2] == {("a", "g"): 32.0}
    # same quantum: nothing new, even if asked again
    assert _actions(policy, _view(5.0, cluster("a", 32, jobs))) == []
    # next quantum, j2 has released its 18 nodes: the others grow into them
    jobs[1] = _run(j2, 2, 2.0, parallelism=2.0)
    assert _actions(policy, _view(10.0, cluster("a", 32, jobs))) == [Grow("j1", 6),
                                                                     Grow("j3", 12)]


def test_without_feedback_the_policy_equipartitions_up_to_maximum_sizes() -> None:
    a, b, c = _spec("a1", hi=10), _spec("a2"), _spec("a3")
    jobs = [_run(a, 2, 1.0), _run(b, 2, 2.0), _run(c, 2, 3.0)]
    got = _actions(_policy(), _view(0.0, cluster("a", 40, jobs)))
    # desires 10, 46, 46 of 40 nodes: a1 is capped at 10, the others share 30
    assert got == [Grow("a1", 8), Grow("a2", 13), Grow("a3", 13)]


def test_a_greedy_doubles_an_efficient_satisfied_job_and_halves_a_wasteful_one() -> None:
    fast, slow = _spec("fast"), _spec("slow")
    jobs = [_run(fast, 4, 1.0, utilization=0.95), _run(slow, 8, 2.0, utilization=0.3)]
    got = _actions(_policy(), _view(0.0, cluster("a", 64, jobs)))
    assert got == [Shrink("slow", 4, True), Grow("fast", 4)]


def test_sites_are_capped_by_their_cluster_and_groups_share_a_site() -> None:
    x1, x2 = _spec("x1", group="astro"), _spec("x2", group="bio")
    y1 = _spec("y1", group="astro")
    policy = _policy()
    view = _view(0.0, cluster("a", 10, [_run(x1, 1, 1.0, parallelism=40.0),
                                         _run(x2, 1, 1.0, parallelism=40.0)]),
                 cluster("b", 50, [_run(y1, 1, 1.0, "b", parallelism=5.0)]))
    got = _actions(policy, view)
    assert got == [Grow("x1", 4), Grow("x2", 4), Grow("y1", 4)]
    assert policy._alloc[3] == {("a",): 10.0, ("b",): 5.0}


def test_reserve_and_rigid_jobs_are_not_handed_out() -> None:
    m = _spec("m")
    rigid = JobSpec("r", mjob("r").kind.RIGID, 6, 6, 6, app="gadget2")
    view = _view(0.0, cluster("a", 20, [_run(m, 2, 1.0), _run(rigid, 6, 0.0)], reserve=4))
    assert _actions(_policy(), view) == [Grow("m", 8)]  # 20 - 4 reserved - 6 rigid = 10


def test_a_waiting_job_gets_its_minimum_first_and_starts_once_nodes_are_free() -> None:
    old, new = _spec("old"), _spec("new", lo=4)
    policy = _policy()
    view = _view(0.0, cluster("a", 16, [_run(old, 16, 1.0)]), waiting=(new,))
    assert _actions(policy, view) == [Shrink("old", 4, True), Defer("new")]
    view = _view(3.0, cluster("a", 16, [_run(old, 12, 1.0)]), waiting=(new,))
    assert _actions(policy, view) == [Place("new", "a", 4)]  # same quantum: retry only


def test_a_job_larger_than_any_cluster_is_rejected() -> None:
    huge = _spec("huge", lo=100, hi=100)
    view = _view(0.0, cluster("a", 16), waiting=(huge,))
    got = _actions(_policy(), view)
    assert len(got) == 1 and isinstance(got[0], Reject) and got[0].job_id == "huge"


def test_upper_levels_keep_their_allocation_until_their_quantum_ends() -> None:
    a1, b1 = _spec("a1", group="ga"), _spec("b1", group="gb")
    policy = _policy(quanta=[1, 2, 2])  # groups every 10 s, site and grid every 20 s
    jobs = [_run(a1, 4, 1.0, parallelism=4.0), _run(b1, 4, 1.0, parallelism=4.0)]
    assert _actions(policy, _view(0.0, cluster("a", 32, jobs))) == []
    jobs = [_run(a1, 4, 1.0, parallelism=20.0), _run(b1, 4, 1.0, parallelism=4.0)]
    # t = 10: only the groups' quantum ends; group ga still holds the 4 it got at t = 0
    assert _actions(policy, _view(10.0, cluster("a", 32, jobs))) == []
    # t = 20: the grid and site reallocate, ga gets 20
    assert _actions(policy, _view(20.0, cluster("a", 32, jobs))) == [Grow("a1", 16)]


def test_rule_equi_ignores_desires_and_splits_equally() -> None:
    a, b = _spec("a", group="ga"), _spec("b", group="gb")
    jobs = [_run(a, 2, 1.0, parallelism=1.0), _run(b, 2, 1.0, parallelism=30.0)]
    got = _actions(_policy(rule="equi"), _view(0.0, cluster("a", 20, jobs)))
    assert got == [Grow("a", 8), Grow("b", 8)]


def test_grouping_by_user_is_a_level_of_its_own() -> None:
    u1, u2 = _spec("u1", user="ann"), _spec("u2", user="bob")
    policy = _policy(levels=["site", "user"])
    jobs = [_run(u1, 2, 1.0, parallelism=3.0), _run(u2, 2, 1.0, parallelism=3.0)]
    _actions(policy, _view(0.0, cluster("a", 32, jobs)))
    assert set(policy._alloc[2]) == {("a", "ann"), ("a", "bob")}


@pytest.mark.parametrize(("options", "message"), [
    ({"bogus": 1}, "unknown option"),
    ({"levels": ["group", "site"]}, "start with"),
    ({"levels": ["site", "colour"]}, "distinct names"),
    ({"levels": "site"}, "list of names"),
    ({"rule": "fifo"}, "not one of"),
    ({"quantum": 0}, "positive"),
    ({"quanta": [1, 2, 3]}, "multiple"),
    ({"quanta": [1, 2]}, "needs 3"),
    ({"quanta": [1, 1, 1], "quantum_factor": 2}, "not both"),
    ({"greedy_utilization": 2.0}, "utilization"),
])
def test_bad_configurations_say_what_is_wrong(options: dict, message: str) -> None:
    with pytest.raises(InputError, match=message):
        TreeConfig.from_mapping(options)


def test_the_registry_builds_it_by_name() -> None:
    policy = make("acds", levels=["site"], quantum=5.0)
    assert isinstance(policy, HierarchicalPolicy)
    assert policy.config.depth == 3
    with pytest.raises(InputError):
        make("acds", nonsense=True)
