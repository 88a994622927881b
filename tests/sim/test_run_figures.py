"""Issue 40, item 7: ``simulate --out`` draws the run (nodes in use and queue over time per
cluster, a Gantt chart with size steps, aggregated for large runs), ``--no-figures`` turns
it off without loading matplotlib, and the command says what it wrote. On main 5ad7fe8
``--out`` wrote jobs.csv and summary.json only, silently."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from matplotlib.collections import PolyCollection
from matplotlib.figure import Figure

from malleable.cli import main
from malleable.metrics import runplots
from malleable.metrics.records import JobRecord
from malleable.metrics.runtrace import Lane, RunTrace
from malleable.model import JobKind, JobSpec, JobState

SRC = Path(__file__).resolve().parents[2] / "src"
PNG = b"\x89PNG\r\n\x1a\n"


def _titles(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The suptitle of every figure saved from now on."""
    titles: list[str] = []
    save = Figure.savefig

    def saving(fig: Figure, path: Any, *args: Any, **kwargs: Any) -> None:
        titles.append(fig._suptitle.get_text() if fig._suptitle is not None else "")
        save(fig, path, *args, **kwargs)

    monkeypatch.setattr(Figure, "savefig", saving)
    return titles


def test_simulate_out_draws_the_run_and_says_what_it_wrote(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    titles = _titles(monkeypatch)
    out = tmp_path / "run"
    assert main(["simulate", "--workload", "wm-prime", "--approach", "pwa", "--policy", "egs",
                 "--out", str(out), "--json"]) == 0
    for name in ("usage.png", "gantt.png"):
        assert (out / name).read_bytes()[:8] == PNG, name
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"malleable: wrote {out / 'jobs.csv'}, {out / 'summary.json'}, "
                   f"{out / 'usage.png'}, {out / 'gantt.png'}"]
    assert "nodes in use per cluster" in titles[0]
    assert "300 jobs" in titles[1] and "steps" in titles[1]  # one bar each


def test_no_figures_writes_the_tables_only_and_never_loads_matplotlib(tmp_path: Path) -> None:
    out = tmp_path / "run"
    code = ("import sys; from malleable.cli import main; "
            f"rc = main(['simulate', '--out', {str(out)!r}, '--no-figures', '--json']); "
            "print('matplotlib' in sys.modules, rc, file=sys.stderr)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, check=False, env={"PYTHONPATH": str(SRC)})
    assert proc.stderr.strip().splitlines()[-1] == "False 0", proc.stderr
    assert sorted(p.name for p in out.iterdir()) == ["jobs.csv", "summary.json"]


def test_a_large_run_is_aggregated_not_drawn_bar_by_bar(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(runplots, "GANTT_BARS", 100)
    monkeypatch.setattr(runplots, "BINS", 50)  # and the series binned
    titles = _titles(monkeypatch)
    out = tmp_path / "run"
    assert main(["simulate", "--workload", "wm", "--out", str(out), "--json"]) == 0
    capsys.readouterr()
    assert "means over 50 time bins" in titles[0]
    assert "300 jobs aggregated" in titles[1]
    assert (out / "gantt.png").read_bytes()[:8] == PNG


def _record(job: str, sizes: list[tuple[float, int]], end: float) -> JobRecord:
    spec = JobSpec(job, JobKind.MALLEABLE, 2, 16, 2, submit_time=0.0, runtime=100.0)
    record = JobRecord(spec, "a")
    for time, size in sizes:
        record.resize(time, size)
    record.finish(end, JobState.COMPLETED)
    return record


def test_a_malleable_job_s_grows_and_shrinks_are_steps_of_its_bar(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    trace = RunTrace.of([_record("1", [(5.0, 2), (10.0, 8), (20.0, 4)], 30.0),
                         _record("2", [(0.0, 4)], 12.0)], [Lane("a", 16)])
    arrays = runplots._Arrays(trace)
    assert arrays.step_time.tolist() == [5.0, 10.0, 20.0, 0.0]
    assert arrays.step_end.tolist() == [10.0, 20.0, 30.0, 12.0]
    figures = _figures(monkeypatch)
    runplots.draw_run(trace, tmp_path)
    bars = _bars(figures[1])
    first = [h for job, h in bars if job == 0]
    assert first == pytest.approx([0.9 * 2 / 8, 0.9, 0.9 * 4 / 8])  # thin, thick, half
    times, busy = arrays.busy(np.array([0]))
    assert times.tolist() == [0.0, 5.0, 10.0, 12.0, 20.0, 30.0]
    assert busy.tolist() == [4.0, 6.0, 12.0, 8.0, 4.0, 0.0]


def test_a_site_of_0_nodes_is_drawn_on_0_to_1_node_without_a_warning(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A site the run never reached counts 0 nodes (a manager run with a site whose host key
    is wrong): its panel was drawn on an empty range, and matplotlib warned "Attempting to
    set identical low and high ylims" (seen in CI, test_site_faults)."""
    import warnings

    trace = RunTrace.of([_record("1", [(0.0, 4)], 12.0)], [Lane("a", 16), Lane("b", 0)])
    figures = _figures(monkeypatch)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        runplots.draw_run(trace, tmp_path)
    usage = figures[0]
    assert usage.axes[1].get_ylim() == pytest.approx((0, 16 * 1.08))
    assert usage.axes[2].get_ylim() == pytest.approx((0, 1.08))


def _figures(monkeypatch: pytest.MonkeyPatch) -> list[Figure]:
    """Every figure saved from now on."""
    figures: list[Figure] = []
    save = Figure.savefig

    def saving(fig: Figure, path: Any, *args: Any, **kwargs: Any) -> None:
        figures.append(fig)
        save(fig, path, *args, **kwargs)

    monkeypatch.setattr(Figure, "savefig", saving)
    return figures


def _bars(fig: Figure) -> list[tuple[float, float]]:
    """(row, thickness) of every bar of a Gantt chart's first panel, left to right."""
    boxes = [verts for c in fig.axes[0].collections if isinstance(c, PolyCollection)
             for verts in (path.vertices for path in c.get_paths())]
    rows = [(round(float(v[:, 1].min() + v[:, 1].max()) / 2, 6), float(np.ptp(v[:, 1])),
             float(v[:, 0].min())) for v in boxes]
    return [(row, thickness) for row, thickness, _ in sorted(rows, key=lambda r: (r[0], r[2]))]


@pytest.mark.parametrize("workload", ["wm", "big"])
def test_the_gantt_bars_are_one_artist_not_one_patch_each(
        workload: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    """A Rectangle per bar (``barh``) cost half the drawing's CPU at 300 jobs and 5x at
    1,500 (issue 40, round two): the bars are one collection per panel."""
    if workload == "big":  # the aggregated chart's right panel: one bar per row
        monkeypatch.setattr(runplots, "GANTT_BARS", 100)
    figures = _figures(monkeypatch)
    assert main(["simulate", "--workload", "wm", "--out", str(tmp_path), "--json"]) == 0
    capsys.readouterr()
    gantt = figures[1]
    assert [len(ax.patches) for ax in gantt.axes] == [0] * len(gantt.axes)
    drawn = sum(len(c.get_paths()) for ax in gantt.axes for c in ax.collections
                if isinstance(c, PolyCollection))
    assert drawn >= (300 if workload == "wm" else 2 * 300 // -(-300 // runplots.ROWS))


def test_binned_means_are_time_weighted() -> None:
    times, values = np.array([0.0, 10.0]), np.array([1.0, 3.0])
    assert runplots._binned(times, values, 0.0, 20.0, 2)[1].tolist() == [1.0, 3.0]
    assert runplots._binned(times, values, 0.0, 20.0, 3)[1] == pytest.approx([1.0, 2.0, 3.0])


def test_without_matplotlib_the_tables_are_written_and_a_warning_says_why(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    from malleable.metrics.runtrace import draw_figures

    monkeypatch.setitem(sys.modules, "malleable.metrics.runplots", None)  # import fails
    trace = RunTrace.of([_record("1", [(0.0, 2)], 10.0)], [Lane("a", 16)])
    assert draw_figures(trace, tmp_path) == []
    assert "no figures drawn" in caplog.text and list(tmp_path.iterdir()) == []


def test_the_figures_of_a_small_run_read_as_they_should(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Seen on a testbed ``manager run`` (issue 40, round two): the Gantt chart's one-line
    title was cut at both sides, its rows were labelled 0.0, 2.5, ... (jobs are whole), an
    empty queue was drawn on a 0.00-0.05 "jobs" axis, and nothing said where each run
    ended when a real run and its twin are set side by side on their own time axes."""
    trace = RunTrace.of([_record("1", [(5.0, 2), (10.0, 8)], 30.0),
                         _record("2", [(0.0, 4)], 12.0), _record("3", [(1.0, 2)], 9.0)],
                        [Lane("a", 16)])
    figures = _figures(monkeypatch)
    runplots.draw_run(trace, tmp_path, "wl · pol · real run x")
    gantt = figures[1]
    for fig in figures:
        head, what = fig._suptitle.get_text().split("\n")
        assert what
        assert head == "wl · pol · real run x; last job ended at 30 s", head
    assert "3 jobs" in gantt._suptitle.get_text()
    rows = gantt.axes[0].get_yticks()
    assert rows.size and all(float(r).is_integer() for r in rows), rows
    figures.clear()
    runplots.draw_run(RunTrace.of([_record("1", [(0.0, 2)], 10.0)], [Lane("a", 16)]),
                      tmp_path)  # no job ever waits
    queue = figures[0].axes[0]
    assert queue.get_ylim()[1] >= 1.0 and all(float(v).is_integer() for v in queue.get_yticks())
