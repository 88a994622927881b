"""KOALA's per-view list of growable jobs (``_Growable``), the grow count that stops at two
candidates, and a decision that skips the placement scan on an empty queue: the same
decisions as the policy as it was before them (kept here as ``_Reference``)."""

from __future__ import annotations

from collections.abc import Mapping

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from malleable.model import (
    DAS3,
    ClusterView,
    Defer,
    Grow,
    JobKind,
    Place,
    RunningJob,
    SizeRule,
    View,
    WaitingJob,
)
from malleable.policies.base import Steps, largest_offer
from malleable.policies.koala import Approach, KoalaPolicy, _Cycle, _Growable
from malleable.policies.malleability import MALLEABILITY_POLICIES
from malleable.sim.background import BackgroundSpec
from malleable.sim.run import SimConfig, simulate
from malleable.workloads.koala import koala_workload
from tests.fakes.builders import by_spec, cluster, drive, mjob, rigid


class _Reference(KoalaPolicy):
    """The decision as it was: the grow list made from ``malleable_jobs`` with the cycle's
    sizes in every cycle, every candidate counted, the queue scanned even when empty."""

    def decide(self, view: View, now: float) -> Steps:
        cycle = _Cycle({name: c.available for name, c in view.clusters.items()})
        if self.grow_threshold < 1.0:
            cycle.limit = self._grow_limit(view)
            cycle.managed = sum(j.size + j.growing - j.releasing for c in view.clusters.values()
                                for j in c.running.values() if j.managed)
        largest = largest_offer(view)
        if self.approach is Approach.PRA:
            yield from self._grow_all(view.clusters, cycle)
        blocked = yield from self._place_queue(view, cycle, largest)
        if self.approach is Approach.PWA:
            made_room = False
            if blocked is not None:
                made_room = yield from self._make_room(view.clusters, cycle, blocked)
            if not made_room:
                yield from self._grow_all(view.clusters, cycle)

    def _grow_all(self, clusters: Mapping[str, ClusterView], cycle: _Cycle) -> Steps:
        for name, here in clusters.items():
            value = cycle.grow_budget(name)
            if value <= 0:
                continue
            jobs = [j for j in here.malleable_jobs() if cycle.size(j) < j.spec.max_size]
            if jobs:
                candidates = sum(1 for j in jobs if j.spec.accepts(cycle.size(j), value) > 0)
                if candidates:
                    self.counts["grow_decisions"] += 1
                if candidates > 1:
                    self.counts["grow_decisions_multi"] += 1
                accepted = yield from cycle.relay(self.malleability.grow(jobs, value))
                cycle.avail[name] -= accepted


def _pair(approach: str, policy: str, threshold: float = 1.0
          ) -> tuple[KoalaPolicy, KoalaPolicy]:
    new = KoalaPolicy.named(approach, policy, threshold)
    old = _Reference(Approach(approach), MALLEABILITY_POLICIES[policy](), threshold)
    return new, old


def _outcome(result: object, policy: KoalaPolicy) -> tuple[object, ...]:
    records = [(r.spec.id, r.start, r.end, r.state, r.cluster, tuple(r.sizes))
               for r in result.records]  # type: ignore[attr-defined]
    return records, list(result.operations), dict(policy.counts)  # type: ignore[attr-defined]


@pytest.mark.parametrize("workload", ["wm", "wmr-prime"])
@pytest.mark.parametrize("approach", ["pra", "pwa", "none"])
@pytest.mark.parametrize("policy", ["fpsma", "egs", "equipartition"])
def test_simulations_equal_the_reference(workload: str, approach: str, policy: str) -> None:
    new, old = _pair(approach, policy)
    jobs = koala_workload(workload, 3)
    ours = simulate(jobs, DAS3, new)
    theirs = simulate(jobs, DAS3, old)
    assert _outcome(ours, new) == _outcome(theirs, old)
    assert new.counts["grow_decisions"] > 0 or approach == "none"


@pytest.mark.parametrize("approach", ["pra", "pwa"])
def test_with_background_load_a_threshold_and_release_delay(approach: str) -> None:
    new, old = _pair(approach, "egs", 0.6)
    config = SimConfig(release_delay=20.0, background=BackgroundSpec(interarrival=300.0),
                       seed=5)
    jobs = koala_workload("wm-prime", 2)
    assert _outcome(simulate(jobs, DAS3, new, config), new) == _outcome(
        simulate(jobs, DAS3, old, config), old)


def _job(draw: st.DrawFn, job_id: str, name: str) -> RunningJob:
    kind = draw(st.sampled_from(list(JobKind)))
    rule = draw(st.sampled_from(list(SizeRule)))
    lo = draw(st.sampled_from([1, 2, 4]))  # a power of two: any rule takes it
    hi = lo if kind is JobKind.RIGID else draw(st.integers(lo, 16))
    spec = mjob(job_id, lo, hi, lo, rule=rule, kind=kind)
    size = draw(st.integers(lo, hi))
    return RunningJob(spec, name, size, float(draw(st.integers(0, 3))),
                      managed=draw(st.booleans()), releasing=draw(st.integers(0, size - lo)),
                      growing=draw(st.integers(0, 2)))


@st.composite
def _views(draw: st.DrawFn) -> View:
    clusters = {}
    count = 0
    for name in draw(st.lists(st.sampled_from("abc"), min_size=1, max_size=3, unique=True)):
        jobs = []
        for _ in range(draw(st.integers(0, 4))):
            count += 1
            jobs.append(_job(draw, f"j{count}", name))
        used = sum(j.size + j.growing for j in jobs)
        nodes = used + draw(st.integers(0, 12))
        clusters[name] = cluster(name, nodes, jobs, reserve=draw(st.integers(0, 2)),
                                 idle=nodes - used)
    waiting = [WaitingJob(mjob(f"w{i}", 1, 8, draw(st.integers(1, 8))) if draw(st.booleans())
                          else rigid(f"w{i}", draw(st.integers(1, 8))))
               for i in range(draw(st.integers(0, 3)))]
    return View(1.0, clusters, waiting)


def _answers(view: View):  # type: ignore[no-untyped-def]
    specs = {j.id: j.spec for c in view.clusters.values() for j in c.running.values()}
    specs.update({w.id: w.spec for w in view.waiting})
    sizes = {j.id: j.size + j.growing for c in view.clusters.values() for j in c.running.values()}
    return by_spec(specs, sizes)


@settings(max_examples=300, deadline=None)
@given(_views(), st.sampled_from(["pra", "pwa", "none"]),
       st.sampled_from(["fpsma", "egs", "equipartition"]), st.sampled_from([1.0, 0.5]))
def test_decisions_equal_the_reference_on_random_views(view: View, approach: str, policy: str,
                                                       threshold: float) -> None:
    new, old = _pair(approach, policy, threshold)
    for _ in range(2):  # the second time from the kept lists
        assert drive(new.decide(view, 1.0), _answers(view)) == drive(
            old.decide(view, 1.0), _answers(view))
    assert new.counts == old.counts


@settings(max_examples=200, deadline=None)
@given(_views())
def test_growable_is_malleable_jobs_that_can_still_grow(view: View) -> None:
    growable = _Growable()
    for name, c in view.clusters.items():
        expected = tuple(j for j in c.malleable_jobs() if j.size + j.growing < j.spec.max_size)
        assert growable.of(name, c) == expected
        assert growable.of(name, c) is growable.of(name, c)  # kept while the view is the same


def test_a_new_view_of_a_cluster_is_read_again() -> None:
    a, b = mjob("a", hi=8), mjob("b", hi=8)
    growable = _Growable()
    first = cluster("c", 20, [RunningJob(a, "c", 4, 1.0), RunningJob(b, "c", 2, 1.0)])
    assert [j.id for j in growable.of("c", first)] == ["a", "b"]  # same start: by id
    second = cluster("c", 20, [RunningJob(a, "c", 8, 1.0), RunningJob(b, "c", 2, 0.5)])
    assert [j.id for j in growable.of("c", second)] == ["b"]  # a at its maximum
    assert [j.id for j in growable.of("c", first)] == ["a", "b"]


def test_the_count_stops_at_two_candidates_and_counts_one() -> None:
    jobs = [mjob(f"j{i}", hi=8) for i in range(4)]
    policy = KoalaPolicy.named("pra", "egs")
    view = View(0.0, {"c": cluster("c", 12, [RunningJob(j, "c", 2, float(i))
                                             for i, j in enumerate(jobs)])})
    drive(policy.decide(view, 0.0), _answers(view))
    assert policy.counts == {"grow_decisions": 1, "grow_decisions_multi": 1}
    one = View(0.0, {"c": cluster("c", 12, [RunningJob(jobs[0], "c", 2, 0.0)])})
    drive(policy.decide(one, 0.0), _answers(one))
    assert policy.counts == {"grow_decisions": 2, "grow_decisions_multi": 1}


def test_pra_keeps_a_malleable_job_waiting_while_a_younger_job_can_still_grow() -> None:
    ft = mjob("ft", hi=16, init=4, rule=SizeRule.POW2)
    gadget = mjob("g", hi=16)
    new = mjob("new")
    view = View(2.0, {"c": cluster("c", 10, [RunningJob(ft, "c", 4, 0.0),
                                             RunningJob(gadget, "c", 2, 1.0)])},
                [WaitingJob(new)])
    log = drive(KoalaPolicy.named("pra", "egs").decide(view, 2.0), _answers(view))
    # EGS offers 2 and 2: ft (powers of two) takes none, g takes 2; 2 nodes are left,
    # and g would still take them, so the waiting job stays
    assert [a for a, _ in log] == [Grow("ft", 2), Grow("g", 2), Defer("new")]


@pytest.mark.parametrize("policy", ["fpsma", "egs"])
def test_pra_places_a_malleable_job_once_growth_has_filled_the_running_ones(policy: str) -> None:
    old, new = mjob("old", hi=4), mjob("new")
    view = View(2.0, {"c": cluster("c", 12, [RunningJob(old, "c", 2, 0.0)])}, [WaitingJob(new)])
    log = drive(KoalaPolicy.named("pra", policy).decide(view, 2.0), _answers(view))
    # old takes 2 of the 10 and is at its maximum after this cycle's answer (not in the
    # view): nothing here can still grow, so the waiting job is placed
    assert log == [(Grow("old", 10), 2), (Place("new", "c", 2), 2)]
