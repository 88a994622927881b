"""The study's EASY + DMR policy: resizes to multiples/divisors, the pending-job shortcut,
reconfiguration points, and the simulator's ``resized_at``."""

from __future__ import annotations

import random

import pytest

from malleable.model import JobKind, JobSpec, WaitingJob
from malleable.policies.dmr import JobLimits, Resize, ResizeKind, dmr_resize
from malleable.policies.dmr_study import EasyDmrPolicy, candidates, easy_dmr, granular_resize
from malleable.policies.registry import make
from malleable.sim.cluster import SimCluster
from malleable.sim.engine import Engine
from malleable.workloads.dmrlib import Version, interval, job_spec
from malleable.workloads.dmrlib_apps import CG, HPG, JACOBI, NBODY
from tests.fakes.builders import running

EXPAND, SHRINK, NONE = ResizeKind.EXPAND, ResizeKind.SHRINK, ResizeKind.NONE
CG_LIMITS = JobLimits(2, 32, 16)
NBODY_LIMITS = JobLimits(1, 32, 1)


def test_expansions_go_to_the_largest_multiple_that_fits() -> None:
    assert granular_resize(4, CG_LIMITS, 30, []) == Resize(EXPAND, 32)
    assert granular_resize(4, CG_LIMITS, 13, []) == Resize(EXPAND, 16)
    assert granular_resize(6, CG_LIMITS, 5, []) == Resize(NONE, 6)  # 12 needs 6 free
    assert granular_resize(12, CG_LIMITS, 30, []) == Resize(EXPAND, 24)  # 36 > upper limit


def test_shrinks_go_to_the_largest_divisor_that_makes_room() -> None:
    # N-body at 32, nothing free, a job of 12 waits: 32 -> 16 frees 16 >= 12
    assert granular_resize(32, NBODY_LIMITS, 0, [12]) == Resize(SHRINK, 16, 0)
    # a job of 20 waits: 32 -> 8 (16 would free only 16)
    assert granular_resize(32, NBODY_LIMITS, 0, [20]) == Resize(SHRINK, 8, 0)
    # 3 free, a job of 32 waits: 32 -> 2 frees 30, 33 >= 32 (4 would free too little)
    assert granular_resize(32, NBODY_LIMITS, 3, [32]) == Resize(SHRINK, 2, 0)


def test_no_divisor_above_preferred_means_no_shrink() -> None:
    # CG at 32 (preferred 16) for a job of 20: a divisor <= 12 is below 16
    assert granular_resize(32, CG_LIMITS, 0, [20]) == Resize(NONE, 32)
    # CG at 24 for a job of 6: dmr_resize would go to 18; the divisors 12, 8... are < 16
    assert dmr_resize(24, CG_LIMITS, 0, [6]).kind is SHRINK
    assert granular_resize(24, CG_LIMITS, 0, [6]) == Resize(NONE, 24)
    # ...and with free nodes the job grows instead (Algorithm 2, line 9): 24 + 8 = 32 is no
    # multiple of 24, so it stays
    assert granular_resize(24, CG_LIMITS, 8, [40]) == Resize(NONE, 24)


def test_a_later_waiting_job_can_be_the_one_made_room_for() -> None:
    # 16 nodes of CG at 32 free nothing for a job of 20; a job of 10 behind it fits in 16
    assert granular_resize(32, CG_LIMITS, 0, [20, 10]) == Resize(SHRINK, 16, 1)


def waiting(kind: JobKind, low: int, high: int, initial: int) -> WaitingJob:
    return WaitingJob(JobSpec(f"w{random.random()}", kind, low, high, initial))


@pytest.mark.parametrize("seed", range(30))
def test_the_pending_shortcut_gives_the_same_decisions(seed: int) -> None:
    """candidates() keeps only the jobs Algorithm 2 could pick: decisions do not change."""
    rng = random.Random(seed)
    queue = []
    for _ in range(rng.randint(0, 40)):
        low = rng.choice((1, 2, 4, 6, 12, 20, 32))
        kind = rng.choice(list(JobKind))
        if kind is JobKind.RIGID:
            queue.append(waiting(kind, low, low, low))
        elif kind is JobKind.MOLDABLE:
            queue.append(waiting(kind, low, 32, low))
        else:
            queue.append(waiting(kind, 1, 32, low))
    everything = [w.spec.initial_size if w.spec.kind is JobKind.MALLEABLE else w.spec.min_size
                  for w in queue]
    kept = candidates(queue, 32)
    for current in (1, 2, 4, 6, 8, 12, 16, 24, 32):
        for limits in (CG_LIMITS, NBODY_LIMITS, JobLimits(1, 32, 4)):
            if current < limits.minimum:
                continue
            for available in (0, 1, 3, 8):
                for rule in (dmr_resize, granular_resize):
                    full = rule(current, limits, available, everything)
                    short = rule(current, limits, available, [low for _, low in kept])
                    index = None if short.pending_index is None else kept[
                        short.pending_index][0]
                    picked = None if full.pending_index is None else full.pending_index
                    assert (full.kind, full.target) == (short.kind, short.target)
                    if full.kind is SHRINK:
                        assert everything[picked or 0] == everything[index or 0]


def test_reconfiguration_points_follow_each_application() -> None:
    policy = EasyDmrPolicy(interval=interval)
    cg = running(job_spec(CG, Version.FLEXIBLE, "cg", 0.0), 2, 0.0)
    assert not policy.at_point(cg, 9.9) and policy.at_point(cg, 10.0)
    nbody = running(job_spec(NBODY, Version.FLEXIBLE, "nb", 0.0), 4, 0.0)
    assert interval(nbody.spec, 4) == pytest.approx(NBODY.time(4) / 50)
    hpg = job_spec(HPG, Version.PURE_MALLEABLE, "h", 0.0)  # starts at 12: 10 workers
    assert interval(hpg, 12) == pytest.approx(HPG.time(12) / 40)
    assert interval(job_spec(JACOBI, Version.FLEXIBLE, "j", 0.0), 8) == 10.0


def test_a_job_releasing_nodes_is_not_at_a_point() -> None:
    spec = job_spec(NBODY, Version.FLEXIBLE, "nb", 0.0)
    assert not EasyDmrPolicy().at_point(running(spec, 8, 0.0, releasing=4), 100.0)


def test_the_simulator_reports_when_a_job_last_changed_size() -> None:
    engine = Engine()
    cluster = SimCluster("c", 32, engine)
    spec = job_spec(NBODY, Version.FLEXIBLE, "nb", 0.0)
    cluster.start(spec, 4)
    assert cluster.observe().running["nb"].resized_at == 0.0
    engine.at(30.0, lambda: None)
    engine.run(until=30.0)
    cluster.offer_grow("nb", 4)
    assert cluster.observe().running["nb"].resized_at == 30.0


def test_registry() -> None:
    assert easy_dmr().name == "easy-dmr" and make("easy-dmr").name == "easy-dmr"


def _pool_scenario(pooled: bool) -> dict[str, tuple[float | None, int]]:
    from malleable.model import Cluster
    from malleable.sim.run import SimConfig, simulate

    def mall(job_id: str) -> JobSpec:
        return JobSpec(job_id, JobKind.MALLEABLE, 2, 8, 8, 0.0, app="fixed", runtime=1000.0,
                       preferred_size=4)

    jobs = [mall("a"), mall("b"),
            JobSpec("w", JobKind.RIGID, 8, 8, 8, 10.0, app="fixed", runtime=100.0)]
    result = simulate(jobs, (Cluster("c", 16),), EasyDmrPolicy(pooled=pooled),
                      SimConfig(timeline=False))
    return {r.spec.id: (r.start, r.max_size) for r in result.records}


def test_the_literal_rule_shrinks_only_when_one_shrink_is_enough() -> None:
    # a and b hold 8 each of 16; w needs 8. One shrink to the preferred 4 frees 4 < 8:
    # the literal Algorithm 2 shrinks nobody, and w waits for a and b to end at 1000.
    assert _pool_scenario(pooled=False)["w"] == (1000.0, 8)


def test_the_pooled_reading_adds_several_shrinks_up() -> None:
    # pooled: a and b each shrink 8 -> 4 (their preferred size); 4 + 4 = 8 lets w start at 10
    assert _pool_scenario(pooled=True)["w"] == (10.0, 8)


def test_pooled_shrinks_nobody_when_all_shrinks_together_are_not_enough() -> None:
    from malleable.model import View
    from tests.fakes.builders import by_spec, cluster, drive

    a = JobSpec("a", JobKind.MALLEABLE, 2, 8, 8, app="fixed", runtime=1000.0, preferred_size=4)
    w14 = JobSpec("w", JobKind.RIGID, 14, 14, 14, app="fixed", runtime=100.0)
    view = View(10.0, {"c": cluster("c", 16, [running(a, 8, 0.0)], idle=8)}, [WaitingJob(w14)])
    log = drive(EasyDmrPolicy(pooled=True).decide(view, 10.0), by_spec({"a": a, "w": w14},
                                                                         {"a": 8}))
    assert not any(type(action).__name__ == "Shrink" for action, _ in log)  # 8 + 4 < 14
