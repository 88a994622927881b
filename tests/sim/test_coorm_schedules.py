"""CooRM in simulation: same schedules as the OAR-like baseline, and fair-start (Fig. 5)."""

from __future__ import annotations

import random

import pytest

from malleable.coorm.core import CoreConfig
from malleable.coorm.oar import simulate_oar
from malleable.coorm.protocol import ClusterInfo, Filter, Link
from malleable.coorm.resources import Platform, paper_platform
from malleable.coorm.sim import simulate_coorm
from malleable.workloads.coorm import SimJob
from malleable.workloads.coorm_apps import Amdahl, App, Rigid


def _random_jobs(seed: int, count: int, max_hosts: int) -> list[SimJob]:
    rng = random.Random(seed)
    jobs = []
    for i in range(count):
        hosts = rng.randint(1, max_hosts)
        runtime = rng.uniform(50, 2000)
        walltime = runtime * rng.uniform(1.0, 3.0)
        app: App = (Amdahl(hosts, runtime, walltime, rng.uniform(0, 0.2))
                    if rng.random() < 0.3 else Rigid(hosts, runtime, walltime))
        jobs.append(SimJob(f"j{i:03d}", float(i), app))
    return jobs


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_same_schedule_as_the_oar_like_baseline(seed: int) -> None:
    """With the baseline releasing hosts as late as fair-start does, every job starts at
    the same time on the same hosts: CooRM only moves the selection to the launchers."""
    platform = paper_platform(2, 16)
    jobs = _random_jobs(seed, 40, 16)
    coorm = simulate_coorm(platform, jobs, CoreConfig(repolicy_interval=0.0, fair_start=5.0))
    oar = simulate_oar(platform, jobs, repolicy_interval=0.0, release_delay=5.0)
    schedule = {j.name: (j.start, j.end, j.hosts) for j in coorm.jobs}
    assert schedule == {j.name: (j.start, j.end, j.hosts) for j in oar.jobs}
    assert all(j.end < float("inf") and not j.killed for j in coorm.jobs)
    assert any(j.kind == "amdahl" for j in coorm.jobs)


def test_cbf_hand_case_in_both_systems() -> None:
    """One 4-host cluster: a 4-host job runs [0, 100); a rigid 4-host job waits for it;
    a 1-host job that fits nowhere before waits too; a moldable job takes what ends first."""
    platform = Platform((ClusterInfo("c1", 4),))
    jobs = [SimJob("big", 0.0, Rigid(4, 100.0, 100.0)),
            SimJob("next", 1.0, Rigid(4, 50.0, 50.0)),
            SimJob("mold", 2.0, Amdahl(2, 40.0, 40.0, serial=0.0))]
    coorm = simulate_coorm(platform, jobs, CoreConfig(repolicy_interval=0.0, fair_start=0.0))
    oar = simulate_oar(platform, jobs, repolicy_interval=0.0)
    for result in (coorm, oar):
        assert (result.job("big").start, result.job("big").end) == (0.0, 100.0)
        assert (result.job("next").start, result.job("next").end) == (100.0, 150.0)
        # Amdahl with no serial part: 80 host-seconds; 4 hosts from 150 end at 170
        mold = result.job("mold")
        assert (mold.start, mold.end, mold.hosts) == (150.0, 170.0, {"c1": 4})


def _fig5(fair_start: float, delay: float) -> float:
    """The three applications of Fig. 5; returns App1's end time.

    App0 holds cluster c1 (asked 100 s, ends at 50); AppX holds c2 until 90. App1
    (submitted first, selection taking ``delay``) wants 10 hosts for 60 s, App2 (quick)
    10 hosts for 30 s; both choose whichever cluster ends them first."""
    platform = Platform((ClusterInfo("c1", 10), ClusterInfo("c2", 10)),
                        (Link("c1", "c2", 0.001),))
    jobs = [SimJob("app0", 0.0, Rigid(10, 50.0, 100.0), Filter(clusters=("c1",))),
            SimJob("appx", 0.0, Rigid(10, 90.0, 90.0), Filter(clusters=("c2",))),
            SimJob("app1", 1.0, Rigid(10, 60.0, 60.0), adaptation_delay=delay),
            SimJob("app2", 10.0, Rigid(10, 30.0, 30.0))]
    result = simulate_coorm(platform, jobs, CoreConfig(repolicy_interval=0.0,
                                                       fair_start=fair_start))
    assert result.job("app0").end == 50.0
    return result.job("app1").end


def test_fig5_without_fair_start_the_quick_app_overtakes() -> None:
    assert _fig5(0.0, delay=0.0) == 110.0   # instant: c1 from 50
    # App2 grabs c1 at 50 for 30 s while App1 thinks; App1 gets c1 only at 80
    assert _fig5(0.0, delay=3.0) == 140.0


def test_fig5_fair_start_protects_a_slow_but_earlier_app() -> None:
    assert _fig5(5.0, delay=0.0) == 115.0   # c1 held until 55
    assert _fig5(5.0, delay=3.0) == 115.0   # adapts within the fair-start delay: no loss
    assert _fig5(5.0, delay=7.0) == 145.0   # slower than fair-start: overtaken again
