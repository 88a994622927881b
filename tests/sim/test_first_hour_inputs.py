"""benchmarks/first_hour_inputs.py, issue 19's sweep of bad inputs over the command line: one
input per class (--quick) is refused cleanly, and the script's own check can fail."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from benchmarks import first_hour_inputs as sweep  # noqa: E402


def test_one_input_per_class_is_refused_cleanly(capsys: pytest.CaptureFixture[str]) -> None:
    assert sweep.main(["--quick"]) == 0
    table = capsys.readouterr().out
    assert "| **total** |" in table and "BAD" not in table


def test_an_input_that_is_accepted_counts_as_not_refused(tmp_path: Path) -> None:
    case = sweep.swf("a good job", "control", sweep.GOOD + "\n")
    clean, detail = sweep.run_case(case, tmp_path)
    assert not clean and "exit 0" in detail and "--out left behind" in detail
