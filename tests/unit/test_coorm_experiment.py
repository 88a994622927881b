"""``malleable experiment coorm --quick``: figures, report and --json, in seconds."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from malleable.cli import main
from malleable.errors import InputError
from malleable.experiments.coorm.experiment import parse_clusters, parse_delays


def test_quick_run_writes_figures_report_and_json(tmp_path: Path,
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "coorm"
    assert main(["experiment", "coorm", "--quick", "--out", str(out), "--json"]) == 0
    numbers = json.loads(capsys.readouterr().out)
    assert set(numbers["clusters"]) == {"1", "2"}
    for nc in ("1", "2"):
        series = numbers["clusters"][nc]
        assert set(series) == {"oar_W0", "coorm_W0", "coorm_W1", "coorm_W2", "coorm_W3"}
        assert series["coorm_W0"]["computed"] > 0 and series["oar_W0"]["computed"] > 0
        assert series["coorm_W0"]["cdr_mb"] > 0
    assert set(numbers["fig7"]) == {"0", "10"} and numbers["fig7"]["0"]["max_s"] == 0.0
    for name in ("fig6.png", "fig7.png", "report.md", "results.json"):
        assert (out / name).stat().st_size > 0
    report = (out / "report.md").read_text()
    assert "QUICK MODE" in report and "| finding (paper" in report
    assert (out / "fig6.png").read_bytes()[:4] == b"\x89PNG"


def test_bad_options_are_input_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["experiment", "coorm", "--quick", "--out", str(tmp_path), "--jobs", "0"]) == 2
    assert "--jobs" in capsys.readouterr().err
    assert main(["experiment", "coorm", "--out", str(tmp_path), "--swf",
                 str(tmp_path / "missing.swf")]) == 2
    with pytest.raises(InputError):
        parse_clusters("a-b")
    with pytest.raises(InputError):
        parse_clusters("0")
    assert parse_clusters("1-3,8") == (1, 2, 3, 8)
    with pytest.raises(InputError, match="include 0"):
        parse_delays("1,2")
    assert parse_delays("5,0,2.5") == (0.0, 2.5, 5.0)


def test_a_run_names_its_simulated_system_from_the_table() -> None:
    """CooRM and the OAR-like baseline are picked by name; any other name is refused (it
    ran CooRM before the table)."""
    from malleable.experiments.coorm.runs import SYSTEMS, RunSpec, Setup, run_one

    assert sorted(SYSTEMS) == ["coorm", "oar"]
    setup = Setup(hosts=8, jobs=4)
    assert run_one(setup, RunSpec("oar", "W0", 1, 0)).spec.system == "oar"
    with pytest.raises(ValueError, match="unknown system 'slurm'; valid: coorm, oar"):
        run_one(setup, RunSpec("slurm", "W0", 1, 0))
