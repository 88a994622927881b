"""Whole simulations: the manager, a policy and the simulated DAS-3 together."""

from __future__ import annotations

import json

import pytest

from malleable.cli import main
from malleable.metrics.summary import summarize
from malleable.model import DAS3, Cluster, JobKind, JobSpec
from malleable.policies.koala import KoalaPolicy
from malleable.sim.background import BackgroundSpec
from malleable.sim.run import SimConfig, simulate
from malleable.workloads.koala import koala_workload


def _summary(workload: str, approach: str, policy: str, seed: int = 1, **cfg: object) -> dict:
    r = simulate(koala_workload(workload, seed), DAS3, KoalaPolicy.named(approach, policy),
                 SimConfig(**cfg))  # type: ignore[arg-type]
    return summarize(r.records, r.operations, r.makespan, r.utilization)


@pytest.mark.parametrize("approach", ["pra", "pwa", "none"])
@pytest.mark.parametrize("policy", ["fpsma", "egs", "equipartition"])
def test_every_job_completes(approach: str, policy: str) -> None:
    s = _summary("wmr-prime", approach, policy)
    assert s["jobs"] == s["completed"] == 300


def test_same_seed_same_result_and_another_seed_differs() -> None:
    a = _summary("wm-prime", "pwa", "egs", seed=3)
    assert a == _summary("wm-prime", "pwa", "egs", seed=3)
    assert a != _summary("wm-prime", "pwa", "egs", seed=4)


def test_malleability_shortens_execution_against_the_baseline() -> None:
    malleable = _summary("wm", "pra", "fpsma")
    rigid = _summary("wm", "none", "fpsma")
    assert malleable["mean_execution_s"] < rigid["mean_execution_s"]
    assert malleable["mean_avg_size"] > rigid["mean_avg_size"] == 2.0


def test_pra_never_shrinks_and_pwa_does_under_load() -> None:
    assert _summary("wm-prime", "pra", "egs")["shrink_ops"] == 0
    assert _summary("wm-prime", "pwa", "egs")["shrink_ops"] > 0


def test_background_load_occupies_nodes_but_every_job_completes() -> None:
    s = _summary("wm-prime", "pwa", "fpsma", background=BackgroundSpec(interarrival=120.0),
                 release_delay=2.0, reconfig_cost=1.0)
    quiet = _summary("wm-prime", "pwa", "fpsma")
    assert s["completed"] == 300
    assert s["mean_avg_size"] < quiet["mean_avg_size"]


def test_a_job_larger_than_every_cluster_is_rejected_not_waited_for() -> None:
    jobs = [JobSpec("big", JobKind.RIGID, 90, 90, 90, app="fixed", runtime=10.0),
            JobSpec("ok", JobKind.RIGID, 2, 2, 2, app="fixed", runtime=10.0)]
    r = simulate(jobs, DAS3, KoalaPolicy.named("none", "fpsma"))
    states = {rec.spec.id: rec.state.value for rec in r.records}
    assert states == {"big": "failed", "ok": "completed"}


def test_placement_tries_threshold_fails_the_job() -> None:
    blocker = JobSpec("blocker", JobKind.RIGID, 4, 4, 4, app="fixed", runtime=100.0)
    waiter = JobSpec("waiter", JobKind.RIGID, 4, 4, 4, submit_time=1.0, app="fixed",
                     runtime=10.0)
    r = simulate([blocker, waiter], [Cluster("c", 4)], KoalaPolicy.named("none", "fpsma"),
                 SimConfig(max_tries=1))
    states = {rec.spec.id: rec.state.value for rec in r.records}
    assert states == {"blocker": "completed", "waiter": "failed"}


def test_cli_json_summary_has_the_documented_keys(capsys: pytest.CaptureFixture[str],
                                                  tmp_path) -> None:  # type: ignore[no-untyped-def]
    rc = main(["simulate", "--workload", "wm", "--approach", "pra", "--policy", "egs",
               "--seed", "2", "--json", "--out", str(tmp_path)])
    assert rc == 0
    summary = json.loads(capsys.readouterr().out)
    for key in ("jobs", "makespan_s", "utilization", "mean_wait_s", "mean_execution_s",
                "mean_response_s", "mean_avg_size", "mean_max_size", "grow_ops", "shrink_ops"):
        assert key in summary
    assert (tmp_path / "jobs.csv").read_text().count("\n") == 301
    assert json.loads((tmp_path / "summary.json").read_text())["jobs"] == 300
