"""The kill-point suite's own logic: its verdict and its test-only cancelling policy."""

from __future__ import annotations

import sys
from collections import Counter
from pathlib import Path

import pytest
from benchmarks.bench_killpoints import PLUGINS, _arguments, judge

from malleable.model import Cancel, ClusterView, JobKind, JobSpec, RunningJob, View
from malleable.policies import registry
from malleable.policies.base import negotiate


def test_one_completed_slurm_job_per_completed_record_is_nothing_lost() -> None:
    lost, duplicated = judge({"a": "completed", "b": "completed"}, Counter(a=1, b=1),
                             {"a": "COMPLETED", "b": "COMPLETED"}, ())
    assert (lost, duplicated) == ([], {})


def test_a_job_without_a_slurm_job_or_unfinished_is_lost() -> None:
    lost, _ = judge({"a": "completed", "b": "running"}, Counter(b=1),
                    {"b": "RUNNING"}, ())
    assert lost == ["a (no Slurm job)", "b (recorded running)"]


def test_a_second_slurm_job_is_a_duplicate() -> None:
    _, duplicated = judge({"a": "completed"}, Counter(a=2), {"a": "COMPLETED"}, ())
    assert duplicated == {"a": 2}


def test_a_cancelled_job_counts_only_where_the_point_cancels_it_and_slurm_agrees() -> None:
    records = {"a": "cancelled", "b": "cancelled"}
    copies = Counter(a=1, b=1)
    final = {"a": "CANCELLED", "b": "COMPLETED"}
    assert judge(records, copies, final, ())[0] == ["a (recorded cancelled)",
                                                    "b (recorded cancelled)"]
    assert judge(records, copies, final, ("a", "b"))[0] == [
        "b (recorded cancelled, Slurm COMPLETED)"]


def test_only_the_cancel_points_run_the_cancelling_policy(tmp_path: Path) -> None:
    assert "cancelling-fpsma" in _arguments("cancel.before:1", tmp_path, 8, tmp_path, [])
    assert "cancelling-fpsma" not in _arguments("shrink.after:1", tmp_path, 8, tmp_path, [])


def _view(start: float) -> View:
    spec = JobSpec("wm-2", JobKind.MALLEABLE, 2, 4, 2, app="ft")
    running = {"wm-2": RunningJob(spec, "vu", 2, start)}
    return View(start, {"vu": ClusterView("vu", 4, 2, running=running)})


def test_the_plugin_policy_cancels_a_chosen_job_once_after_it_ran_long_enough(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(PLUGINS))
    monkeypatch.delitem(sys.modules, "killpoint_policies", raising=False)
    policy = registry.make("cancelling-fpsma", cancel=["wm-2"], after=30.0)
    view = _view(100.0)

    def cancels(now: float) -> list[Cancel]:
        return [a for a in negotiate(policy.decide(view, now)) if isinstance(a, Cancel)]

    assert cancels(120.0) == []
    assert [c.job_id for c in cancels(130.0)] == ["wm-2"]
    assert cancels(140.0) == []  # once
