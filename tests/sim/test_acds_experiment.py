"""``malleable experiment acds --quick``: figures, report, JSON; bad input."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from malleable.cli import main
from malleable.experiments.acds.figures import FILES
from malleable.experiments.acds.plan import Results, Settings, run_all
from malleable.experiments.acds.report import diagnostics
from malleable.sim.quantum.engine import Algorithm
from malleable.sim.quantum.scenario import RunMetrics


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


def _metrics(makespan: float, span_bound: bool) -> RunMetrics:
    return RunMetrics(makespan, 0.9, 0.5, 100.0, span_bound)


def test_diagnostics_count_the_binding_term_and_split_the_fig7_ratio_by_it() -> None:
    """Two job counts, two repetitions: repetition 0 span-bound, repetition 1 work-bound
    at 20 jobs; both work-bound at 40. EQUI-EQUI takes 110 where AC-DS takes 100 on
    work-bound scenarios, 90 on span-bound ones."""
    s = Settings.quick(levels=(2,), jobs=(20, 40), reps=2)
    res = Results()
    bound = {(20, 0): True, (20, 1): False, (40, 0): False, (40, 1): False}
    for (n, rep), span in bound.items():
        res.add((2, Algorithm.ACDS, 1, 0.0, n), rep, _metrics(100.0, span))
        res.add((2, Algorithm.AGDS, 1, 0.0, n), rep, _metrics(105.0, span))
        res.add((2, Algorithm.EQUI, 1, 0.0, n), rep, _metrics(90.0 if span else 110.0, span))
    d = diagnostics(res, s)
    assert (d["share_span_bound"], d["share_work_bound"]) == (0.25, 0.75)
    assert (d["share_span_bound_light"], d["share_work_bound_heavy"]) == (0.5, 1.0)
    assert d["fig7_equi_over_acds_when_span_binds"] == pytest.approx(0.9)
    assert d["fig7_equi_over_acds_when_work_binds"] == pytest.approx(1.1)
    assert (d["fig7_runs_span_binds"], d["fig7_runs_work_binds"]) == (1, 3)
    assert d["acds_makespan_over_lower_bound"] == pytest.approx(1.0)


@pytest.mark.parametrize("bad", [["--min-parallelism", "0.5"], ["--min-parallelism", "300"],
                                 ["--contention", "1"], ["--contention", "400"],
                                 ["--min-parallelism", "16", "--contention", "16"]])
def test_bad_regimes_exit_2_with_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                          bad: list[str]) -> None:
    assert main(["experiment", "acds", "--quick", "--out", str(tmp_path), *bad]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("malleable: error:")


def test_contention_runs_a_second_sweep_beside_the_paper_setting(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "acds"
    args = ["experiment", "acds", "--quick", "--out", str(out), "--json", "--job-counts",
            "20:20:1", "--reps", "1", "--contention", "32"]
    assert main(args) == 0
    payload = json.loads(capsys.readouterr().out)
    assert payload["settings"]["min_parallelism"] == 1.0
    assert payload["contention"]["settings"]["min_parallelism"] == 32.0
    assert payload["contention"]["figures"] != payload["figures"]
    for name in FILES.values():
        assert (out / "contention" / name).is_file()
    report = (out / "report.md").read_text()
    header = ("| fig | finding (criterion) | paper | ours: Table 1 (A in [1, 256]) | "
              "ours: contention (A in [32, 256], tuning) | conditions under which it holds |")
    assert header in report
    assert "## Which lower bound binds" in report
    rows = [line.split(" | ") for line in report.splitlines()
            if line.startswith("| fig") and line.count(" | ") == 5 and "finding (" not in line]
    assert len(rows) == len(payload["findings"])
    for row, main_run, other in zip(rows, payload["findings"],
                                    payload["contention"]["findings"], strict=True):
        conditions = row[-1].split("; by binding term")[0]
        assert ("Table 1 (A in [1, 256])" in conditions) is main_run["holds"]
        assert ("contention (A in [32" in conditions) is other["holds"]
        assert ("none of the regimes run" in conditions) is not (main_run["holds"]
                                                                  or other["holds"])
