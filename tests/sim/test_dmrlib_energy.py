"""Energy accounting (Appendix B: idle nodes 100 W, loaded nodes 340 W) and allocation rate."""

from __future__ import annotations

import pytest

from malleable.experiments.dmrlib.study import Setup, measure, running_series
from malleable.metrics.energy import allocation_rate, busy_area, energy_kwh
from malleable.model import Cluster, JobKind, JobSpec
from malleable.policies.easy import EasyPolicy
from malleable.sim.run import simulate
from malleable.workloads.dmrlib import NONE, Submission


def test_energy_by_hand() -> None:
    # 128 nodes for 100 s, 32 of them loaded: 340*3200 + 100*9600 J
    assert energy_kwh(128, 100.0, 3200.0) == pytest.approx((340 * 3200 + 100 * 9600) / 3.6e6)
    assert energy_kwh(10, 3600.0, 0.0) == pytest.approx(1.0)  # 10 idle nodes, 1 h: 1 kWh
    assert energy_kwh(10, 3600.0, 36000.0) == pytest.approx(3.4)
    assert energy_kwh(1, 3600.0, 0.0, idle_watts=50.0) == pytest.approx(0.05)


def test_energy_rejects_inconsistent_figures() -> None:
    with pytest.raises(ValueError):
        energy_kwh(10, 100.0, 1001.0)
    with pytest.raises(ValueError):
        energy_kwh(0, 100.0, 0.0)


def test_busy_area_of_a_step_function() -> None:
    steps = [(0.0, 4), (10.0, 6), (20.0, 0)]
    assert busy_area(steps, 0.0, 30.0) == 4 * 10 + 6 * 10
    assert busy_area(steps, 5.0, 15.0) == 4 * 5 + 6 * 5
    assert busy_area([], 0.0, 10.0) == 0.0
    assert allocation_rate(10, 30.0, 100.0) == pytest.approx(1 / 3)


def test_a_simulated_run_is_accounted_node_by_node() -> None:
    # on 128 nodes: a 32-node job for 100 s, then a 64-node one for 50 s after a gap
    jobs = [JobSpec("a", JobKind.RIGID, 32, 32, 32, app="fixed", runtime=100.0, walltime=100.0),
            JobSpec("b", JobKind.RIGID, 64, 64, 64, submit_time=150.0, app="fixed",
                    runtime=50.0, walltime=50.0)]
    result = simulate(jobs, (Cluster("c", 128),), EasyPolicy())
    out = measure(Setup(2, Submission.RIGID, NONE, 1), result, keep_series=True)
    busy = 32 * 100 + 64 * 50
    assert out.workload_time == 200.0
    assert out.allocation == pytest.approx(busy / (128 * 200))
    assert out.energy == pytest.approx((340 * busy + 100 * (128 * 200 - busy)) / 3.6e6)
    assert busy_area(out.busy, 0.0, 200.0) == busy
    assert out.running == [(0.0, 1), (100.0, 0), (150.0, 1), (200.0, 0)]


def test_running_series_merges_simultaneous_changes() -> None:
    assert running_series([(0.0, 10.0), (10.0, 20.0)]) == [(0.0, 1), (10.0, 1), (20.0, 0)]
