"""The hierarchical policy driven by the core manager on the core simulator.

The simulated clusters report no application feedback, so this exercises the
policy's documented fallback (EQUI-EQUI capped by the jobs' maximum sizes) end to
end: placement, grows, mandatory shrinks, released nodes reused.
"""

from __future__ import annotations

from dataclasses import replace

from malleable.metrics.summary import summarize
from malleable.model import DAS3, Cluster
from malleable.policies.registry import make
from malleable.sim.run import SimConfig, simulate
from malleable.workloads.koala import koala_workload


def _workload(seed: int = 2, jobs: int = 120) -> list:
    specs = koala_workload("wm-prime", seed, jobs)
    return [replace(s, group=f"g{i % 3}", user=f"u{i % 2}") for i, s in enumerate(specs)]


def _run(clusters: tuple[Cluster, ...], **options: object) -> dict:
    policy = make("acds", quantum=30.0, **options)
    r = simulate(_workload(), clusters, policy, SimConfig(poll_interval=30.0, release_delay=2.0))
    return summarize(r.records, r.operations, r.makespan, r.utilization)


def test_every_job_completes_on_das3_and_jobs_grow_and_shrink() -> None:
    s = _run(DAS3)
    assert s["jobs"] == s["completed"] == 120
    assert s["grow_ops"] > 0 and s["shrink_ops"] > 0
    assert s["mean_avg_size"] > 2.0  # jobs start at their minimum, 2, and grow


def test_deeper_trees_and_longer_upper_quanta_also_complete() -> None:
    s = _run(DAS3, levels=["site", "group", "user"], quanta=[1, 2, 4, 8])
    assert s["jobs"] == s["completed"] == 120


def test_a_small_grid_forces_waiting_jobs_to_take_nodes_from_running_ones() -> None:
    s = _run((Cluster("small", 16), Cluster("tiny", 8)))
    assert s["completed"] == 120
    assert s["shrink_ops"] > 0


def test_same_inputs_same_outcome() -> None:
    assert _run(DAS3) == _run(DAS3)
