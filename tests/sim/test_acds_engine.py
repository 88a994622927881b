"""The quantum engine: execution rate, A-Control's convergence, batching, costs."""

from __future__ import annotations

import numpy as np
import pytest

from malleable.policies.hierarchical.tree import chain
from malleable.sim.quantum.engine import Algorithm, EngineConfig, simulate
from malleable.sim.quantum.jobs import DowneyParams, JobSet
from malleable.sim.quantum.scenario import run_batch, scenario


def _constant(h: float, span: float, release: float = 0.0) -> JobSet:
    """One job of constant parallelism ``h`` (segments of one quantum)."""
    n = int(span)
    return JobSet(np.array([release]), np.array([h * span]), np.array([h]), np.full(n, h),
                  np.ones(n), np.array([0, n]))


def test_a_control_converges_in_one_quantum_on_constant_parallelism() -> None:
    out = simulate(_constant(8.0, 20.0), np.array([0]), chain(2),
                   EngineConfig(Algorithm.ACDS, processors=256.0))
    # quantum 0: desire 1, covers 1/8 of a span unit; from quantum 1 on it gets 8 = h.
    assert out.completion[0] == pytest.approx(1 + 20 - 1 / 8)
    assert out.satisfied[0] == 21  # satisfied in every quantum
    assert out.allotted[0] == pytest.approx(1 + 20 * 8)


def test_execution_rate_is_the_smaller_of_allocation_and_parallelism() -> None:
    # EQUI gives the lone job all 256 processors: it runs at its parallelism, 4 -> span 20
    out = simulate(_constant(4.0, 20.0), np.array([0]), chain(2),
                   EngineConfig(Algorithm.EQUI, processors=256.0))
    assert out.completion[0] == pytest.approx(20.0)
    # with 2 processors it runs at 2 of 4: twice as long
    out = simulate(_constant(4.0, 20.0), np.array([0]), chain(2),
                   EngineConfig(Algorithm.EQUI, processors=2.0))
    assert out.completion[0] == pytest.approx(40.0)


def test_a_job_released_mid_quantum_starts_at_the_next_one() -> None:
    out = simulate(_constant(1.0, 5.0, release=2.5), np.array([0]), chain(3),
                   EngineConfig(Algorithm.EQUI))
    assert out.completion[0] == pytest.approx(3 + 5)


def _scenarios(k: int = 4) -> list:
    params = DowneyParams(work_scale=2e-4)
    return [scenario(k, n, (7, n, r), params) for n, r in ((30, 0), (60, 1), (90, 2))]


@pytest.mark.parametrize("algorithm", list(Algorithm))
def test_batching_runs_gives_the_same_results_as_one_at_a_time(algorithm: Algorithm) -> None:
    scs = _scenarios()
    config = EngineConfig(algorithm, quantum_factor=2, cost_factor=0.1)
    together = run_batch(scs, config)
    alone = [run_batch([s], config)[0] for s in scs]
    for a, b in zip(together, alone, strict=True):
        assert a.makespan == pytest.approx(b.makespan, rel=1e-12)
        assert a.utilization == pytest.approx(b.utilization, rel=1e-12)


def test_every_job_completes_and_no_schedule_beats_the_lower_bound() -> None:
    for algorithm in Algorithm:
        for m in run_batch(_scenarios(), EngineConfig(algorithm)):
            assert m.lower_bound <= m.makespan < np.inf
            assert 0 < m.utilization <= 1 + 1e-9
            assert 0 < m.platform_utilization <= 1 + 1e-9


def test_integral_allocation_completes_every_job() -> None:
    s = _scenarios()[1]
    out = simulate(s.jobs, s.leaf, s.tree, EngineConfig(Algorithm.ACDS, integral=True))
    assert not np.isnan(out.completion).any()
    assert np.all(out.completion >= s.jobs.release + s.jobs.span - 1e-9)


def test_reallocation_cost_slows_ac_ds_down() -> None:
    s = _scenarios(5)[2]
    free = run_batch([s], EngineConfig(Algorithm.ACDS))[0]
    costly = run_batch([s], EngineConfig(Algorithm.ACDS, cost_factor=0.5))[0]
    assert costly.makespan > free.makespan
    assert costly.utilization < free.utilization
