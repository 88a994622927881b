"""``malleable experiment acds --quick``: figures, report, JSON; bad input."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from malleable.cli import main
from malleable.experiments.acds.figures import FILES
from malleable.experiments.acds.plan import Results, Settings, run_all


def test_quick_sweep_writes_every_figure_the_report_and_the_key_numbers(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "acds"
    assert main(["experiment", "acds", "--quick", "--out", str(out), "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    for name in FILES.values():
        assert (out / name).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert json.loads((out / "summary.json").read_text()) == payload
    figures = payload["figures"]
    assert set(figures) == {"fig4", "fig5", "fig6", "fig7", "fig8", "diagnostics"}
    assert payload["settings"]["reps"] == 2
    for k in payload["settings"]["levels"]:
        row = figures["fig6"][f"K{k}"]
        assert row["agds_over_acds"] == pytest.approx(row["agds_over_equi"]
                                                      / row["acds_over_equi"], rel=0.05)
    assert 0 < figures["fig5"]["acds_utilization_light"] <= 1
    report = (out / "report.md").read_text()
    assert "| fig | finding (criterion) | paper | ours | verdict |" in report
    assert len(payload["findings"]) >= 10
    assert all(isinstance(f["holds"], bool) for f in payload["findings"])


def _tiny() -> Settings:
    return Settings.quick(levels=(3,), jobs=(20,), reps=2, quantum_factors=(1, 2),
                          fig7_costs=(0.0,), fig8_costs=(0.5,), fig8_jobs=20)


def _numbers(results: Results) -> dict:
    return {cell: [(m.makespan, m.utilization) for m in results.of(cell)]
            for cell in sorted(results.runs, key=str)}


def test_the_same_seed_gives_the_same_numbers_in_one_or_two_processes() -> None:
    settings = _tiny()
    first = _numbers(run_all(settings))
    assert _numbers(run_all(settings)) == first
    assert _numbers(run_all(settings, workers=2)) == first
    other = _numbers(run_all(replace(settings, seed=2)))
    assert other != first


@pytest.mark.parametrize("bad", [["--reps", "0"], ["--job-counts", "20-100"],
                                 ["--job-counts", "50:20:10"], ["--jobs", "50:20:10"],
                                 ["--work-scale", "0"], ["--workers", "0"]])
def test_bad_options_exit_2_with_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                          bad: list[str]) -> None:
    assert main(["experiment", "acds", "--quick", "--out", str(tmp_path), *bad]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("malleable: error:")


def test_integral_allocation_runs_the_same_sweep_in_whole_processors() -> None:
    settings = _tiny()
    whole = _numbers(run_all(replace(settings, integral=True)))
    assert whole.keys() == _numbers(run_all(settings)).keys()
    assert all(0 < u <= 1 for runs in whole.values() for _, u in runs)
