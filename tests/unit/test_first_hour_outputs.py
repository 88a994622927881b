"""Issue 40, item 6: output that said the wrong thing (each test failed on main 5ad7fe8)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from malleable.cli import build_parser


def test_the_top_help_names_exit_code_5_and_keeps_the_testbed_line_whole() -> None:
    text = " ".join(build_parser().format_help().split())
    assert "5 a `manager run` ended with failed jobs" in text
    assert "testbed bring up, inspect and remove the containerized Slurm and OAR clusters" in text


def test_acds_fig5_says_what_its_utilization_is_per() -> None:
    from malleable.experiments.acds.figures import _fig5
    from malleable.experiments.acds.plan import Settings, run_all

    settings = Settings.quick(levels=(3,), jobs=(20,), reps=1, quantum_factors=(1,),
                              fig7_costs=(0.0,), fig8_costs=(0.5,), fig8_jobs=20)
    fig = _fig5(run_all(settings), settings)
    labels = {ax.get_ylabel() for ax in fig.axes if ax.get_ylabel()}
    assert labels == {"utilization (work / allotted processor time)"}  # docs/acds.md


def test_koala_variant_figures_are_not_titled_sensitivity(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from malleable.experiments.koala import plots as koala_plots
    from malleable.experiments.koala.runs import BASELINE, FIG7, JobRow, Results, Run

    results = Results((1,))
    for combo in (*FIG7, *BASELINE):
        jobs = [JobRow("gadget2", True, 2.0, 4, 100.0, 150.0, 10.0, False)]
        results.add(Run(combo, "reconfig", 1, jobs, {}, grows=[60.0], shrinks=[],
                        utilization=[(0.0, 0.5), (60.0, 0.2)]))
    titles: list[str] = []

    def save(fig: Any, path: Path, title: str = "", *args: Any, **kwargs: Any) -> Path:
        titles.append(title)
        return path

    monkeypatch.setattr(koala_plots.plots, "save", save)
    koala_plots.draw_figure(results, "7", tmp_path, variant="reconfig")
    assert titles and all("sensitivity" not in t for t in titles), titles
    assert "variant: reconfig" in titles[0]


def test_manager_status_of_a_site_that_never_answered(
        capsys: pytest.CaptureFixture[str]) -> None:
    from malleable.commands.serve import _print_status

    _print_status({"running": True, "stale": False, "pid": 1, "run_id": "r", "cycles": 3,
                   "last_cycle_seconds": 0.1, "poll": 1.0,
                   "policy": {"name": "fpsma", "options": {}},
                   "sites": [{"name": "vu", "online": False, "last_error": "ssh: refused",
                              "nodes": None, "idle": None, "reserve": 0, "ignored_tags": 0}],
                   "jobs": [], "pending_resizes": []})
    out = capsys.readouterr().out
    assert "None" not in out
    assert "site vu: DOWN (ssh: refused), nodes not known (no answer yet)" in out
