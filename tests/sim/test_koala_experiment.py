"""`malleable experiment koala` end to end (one seed), its report and the plot helpers."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from malleable.cli import main
from malleable.metrics import plots


@pytest.mark.slow
def test_experiment_writes_figures_report_and_json(tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "koala"
    assert main(["experiment", "koala", "--out", str(out), "--reps", "1",
                 "--no-sensitivity", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["seeds"] == [1]
    assert summary["simulations"] == 12  # 4 (Fig. 7) + 4 (Fig. 8) + 4 baselines
    assert summary["variants"] == ["paper"]
    run = summary["runs"]["paper:pra/fpsma/wm"]
    assert run["figure"] == "7" and run["grows"] == 300
    assert summary["findings"]["paper"]["C1"]["verdict"] == "holds"
    for name in ["fig7.png", "fig8.png", *[f"fig{f}{p}.png" for f in "78" for p in "abcdef"]]:
        assert (out / name).stat().st_size > 10_000, name
    report = (out / "report.md").read_text()
    for key in ("A1", "A10", "B1", "B9", "C1"):
        assert f"| {key} |" in report
    assert "does not hold" in report and "**holds**" in report
    assert json.loads((out / "summary.json").read_text()) == summary


@pytest.mark.parametrize("flag", ["--reps", "--seeds"])
def test_bad_seed_count_is_an_input_error(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                          flag: str) -> None:
    assert main(["experiment", "koala", "--out", str(tmp_path), flag, "0"]) == 2
    err = capsys.readouterr().err
    assert "--reps must be at least 1" in err and "Traceback" not in err


def test_output_directory_that_cannot_be_made_is_an_input_error(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    assert main(["experiment", "koala", "--out", str(blocker / "sub"), "--reps", "1",
                 "--no-sensitivity"]) == 2
    assert "cannot create the output directory" in capsys.readouterr().err


def test_binned_mean_of_a_step_function() -> None:
    # 0 until 5, then 2 until 15, then 1: bins of 10 -> means 1.0, 1.5, 1.0
    centres, means = plots.binned_mean([(0.0, 0.0), (5.0, 2.0), (15.0, 1.0)], 10.0, end=30.0)
    assert centres.tolist() == [5.0, 15.0, 25.0]
    assert np.allclose(means, [1.0, 1.5, 1.0])
    empty = plots.binned_mean([], 10.0)
    assert empty[0].size == 0 and empty[1].size == 0


def test_cumulative_counts_and_cdf_draw(tmp_path: Path) -> None:
    x, y = plots.cumulative([3.0, 1.0, 2.0])
    assert x.tolist() == [0.0, 1.0, 2.0, 3.0] and y.tolist() == [0, 1, 2, 3]
    fig, ax = plots.single()
    plots.cdf(ax, [1.0, float("nan"), 3.0, 2.0], "x")
    line = ax.get_lines()[0]
    assert line.get_ydata()[-1] == 1.0 and len(line.get_xdata()) == 4
    plots.cdf(ax, [], "empty")  # draws nothing
    assert len(ax.get_lines()) == 1
    plots.finish(ax, "t", "x")
    assert plots.save(fig, tmp_path / "c.png").stat().st_size > 0
