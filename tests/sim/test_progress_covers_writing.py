"""An experiment's progress bars are full only once every file is written (issue 19).

Every bar update and every file written (a figure saved, a text file written) is logged in
order; the bars may not all be full (the command looking finished) before the last file is
written.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from matplotlib.figure import Figure
from rich.progress import Progress

from malleable.cli import main

QUICK = {
    "acds": ["--quick"],
    "coorm": ["--quick"],
    "dmrlib": ["--quick"],
}


def _logging(log: list[tuple[str, Any]], method: Callable[..., Any],
             event: Callable[..., tuple[str, Any]]) -> Callable[..., Any]:
    def wrapped(*args: Any, **kwargs: Any) -> Any:
        result = method(*args, **kwargs)
        log.append(event(*args, **kwargs))
        return result
    return wrapped


def _bars(progress: Progress) -> list[tuple[float, float | None]]:
    return [(t.completed, t.total) for t in progress.tasks]


@pytest.mark.parametrize("name", sorted(QUICK))
def test_no_bar_is_full_before_the_last_file(name: str, tmp_path: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    log: list[tuple[str, Any]] = []
    monkeypatch.setattr(Figure, "savefig", _logging(
        log, Figure.savefig, lambda fig, path, *a, **k: ("file", Path(path).name)))
    monkeypatch.setattr(Path, "write_text", _logging(
        log, Path.write_text, lambda path, *a, **k: ("file", path.name)))
    for method in ("update", "advance"):
        monkeypatch.setattr(Progress, method, _logging(
            log, getattr(Progress, method), lambda bar, *a, **k: ("bars", _bars(bar))))
    out = tmp_path / name
    assert main(["experiment", name, "--out", str(out), *QUICK[name]]) == 0
    files = [i for i, (kind, _) in enumerate(log) if kind == "file"]
    assert {log[i][1] for i in files} >= {"report.md", "summary.json"}
    assert sum(1 for i in files if str(log[i][1]).endswith(".png")) >= 2
    full = [i for i, (kind, bars) in enumerate(log) if kind == "bars"
            and all(total is not None and done >= total for done, total in bars)]
    assert full, "the bars never reached their end"
    assert full[0] > files[-1], (
        f"the bars were full at event {full[0]} but files were still written until "
        f"event {files[-1]}: {log[full[0]:files[-1] + 1]}")
    last = log[max(i for i, (kind, _) in enumerate(log) if kind == "bars")][1]
    assert all(done == total for done, total in last), last
