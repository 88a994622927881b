"""The job kinds of Table 3 under the study's scheduler, on hand-checkable workloads.

Most scenarios use a 32-node cluster whose first 30 nodes a 'hog' holds until
t=100, and one CG job (2..32, preferred 16; 900 s on 2 nodes, 180 s on 32).
"""

from __future__ import annotations

import pytest

from malleable.metrics.records import JobRecord
from malleable.model import Cluster, JobKind, JobSpec
from malleable.policies.dmr_study import EasyDmrPolicy
from malleable.sim.run import SimConfig, simulate
from malleable.workloads.dmrlib import Version, interval, job_spec
from malleable.workloads.dmrlib_apps import CG, HPG, NBODY

CONFIG = SimConfig(poll_interval=10.0)


def hog(nodes: int = 30, runtime: float = 100.0) -> JobSpec:
    return JobSpec("hog", JobKind.RIGID, nodes, nodes, nodes, app="fixed", runtime=runtime,
                   walltime=runtime)


def run(*jobs: JobSpec, nodes: int = 32) -> dict[str, JobRecord]:
    result = simulate(list(jobs), (Cluster("c", nodes),), EasyDmrPolicy(interval=interval),
                      CONFIG)
    return {r.spec.id: r for r in result.records}


def test_a_flexible_job_starts_small_and_grows() -> None:
    r = run(hog(), job_spec(CG, Version.FLEXIBLE, "cg", 0.0))["cg"]
    assert r.sizes == [(0.0, 2), (100.0, 32)]
    # 100 s at 2 nodes do 100/900 of the work; the rest takes 8/9 of 180 s at 32
    assert r.end == pytest.approx(100.0 + 160.0)


def test_a_pure_moldable_job_keeps_its_start_size() -> None:
    r = run(hog(), job_spec(CG, Version.PURE_MOLDABLE, "cg", 0.0))["cg"]
    assert r.sizes == [(0.0, 2)]
    assert r.end == pytest.approx(900.0)


@pytest.mark.parametrize("version", [Version.PURE_MALLEABLE, Version.FIXED])
def test_rigid_submissions_wait_for_the_upper_limit(version: Version) -> None:
    r = run(hog(), job_spec(CG, version, "cg", 0.0))["cg"]
    assert r.sizes == [(100.0, 32)]
    assert r.end == pytest.approx(280.0)


def test_growth_waits_for_the_scheduling_period() -> None:
    r = run(hog(runtime=5.0), job_spec(CG, Version.FLEXIBLE, "cg", 0.0))["cg"]
    assert r.sizes == [(0.0, 2), (10.0, 32)]  # free from t=5, CG's inhibitor is 10 s


def test_expansions_go_to_multiples_of_the_current_size() -> None:
    # 3 nodes free beside a 29-node hog: CG starts at 3; at t=100, 29 more are free
    r = run(hog(29), job_spec(CG, Version.FLEXIBLE, "cg", 0.0))["cg"]
    assert r.sizes == [(0.0, 3), (100.0, 30)]  # 30 = 10 x 3, the largest multiple <= 32


def test_a_pure_malleable_job_shrinks_so_a_waiting_job_starts_at_once() -> None:
    nbody = job_spec(NBODY, Version.PURE_MALLEABLE, "nbody", 0.0)  # 32 nodes, preferred 1
    hpg = job_spec(HPG, Version.FIXED, "hpg", 20.0)  # rigid, 12 nodes
    records = run(nbody, hpg)
    assert records["nbody"].sizes == [(0.0, 32), (20.0, 16)]  # 16: a divisor of 32 >= 12 freed
    assert records["hpg"].start == 20.0


def test_a_job_is_never_shrunk_below_its_preferred_size() -> None:
    cg = job_spec(CG, Version.PURE_MALLEABLE, "cg", 0.0)  # 32 nodes, preferred 16
    big = JobSpec("big", JobKind.RIGID, 20, 20, 20, submit_time=20.0, app="fixed", runtime=10.0,
                  walltime=10.0)
    records = run(cg, big)
    assert records["cg"].sizes == [(0.0, 32)]  # freeing 20 would take CG to 12 < 16
    assert records["big"].start == pytest.approx(records["cg"].end)


def test_flexible_jobs_shrink_to_make_room_and_grow_back() -> None:
    first = job_spec(NBODY, Version.FLEXIBLE, "a", 0.0)  # takes all 32 nodes
    second = job_spec(NBODY, Version.FLEXIBLE, "b", 30.0)  # needs 1: "a" halves for it
    records = run(first, second)
    assert records["a"].sizes[:2] == [(0.0, 32), (30.0, 16)]
    assert records["b"].sizes[0] == (30.0, 16)  # moldable: all the released nodes
    assert records["b"].start == 30.0
