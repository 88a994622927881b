"""Issue 40, item 4: long commands show progress on a terminal and nothing in a pipe or
with ``--json``. On main 5ad7fe8 the experiments drew their bars into a pipe too, and
``simulate`` had no progress at all."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from malleable.cli import main
from malleable.commands import simulate


def test_an_experiment_draws_no_bars_into_a_pipe(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["experiment", "dmrlib", "--quick", "--reps", "1", "--out",
                 str(tmp_path / "d")]) == 0
    err = capsys.readouterr().err  # not a terminal
    assert "simulated" not in err and "━" not in err, err


def test_simulate_shows_a_bar_on_a_terminal_only(monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    with simulate.progress_bar(10, quiet=False) as ended:
        assert ended is None  # stderr is captured: not a terminal
    monkeypatch.setattr("sys.stderr.isatty", lambda: True)
    with simulate.progress_bar(10, quiet=True) as ended:
        assert ended is None  # --json
    counted: list[int] = []
    monkeypatch.setattr(simulate, "PROGRESS_EVERY", 1)
    from rich.progress import Progress

    update = Progress.update

    def recording(self: Progress, task: object, **kwargs: object) -> None:
        counted.append(int(kwargs.get("completed", -1)))  # type: ignore[call-overload]
        update(self, task, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(Progress, "update", recording)
    with simulate.progress_bar(3, quiet=False) as ended:
        assert ended is not None
        for _ in range(3):
            ended(None, 0, 0)
    assert counted == [1, 2, 3]


def test_simulate_json_in_a_pipe_prints_the_summary_only(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", "--json"]) == 0
    captured = capsys.readouterr()
    assert captured.err == "" and json.loads(captured.out)["jobs"] == 300
