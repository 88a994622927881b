"""The figures of one run (``simulate --out``, ``manager run --out``): what a researcher
looks at first (docs/simulate.md, "Figures").

* ``usage.png``: the jobs waiting in the manager's queue, then each cluster's nodes in use
  (the capacity dashed), over time.
* ``gantt.png``: the jobs. Up to :data:`GANTT_BARS` jobs, one row each in submission order:
  a grey line while it waits, then a bar coloured by its cluster whose thickness is its
  size, so a malleable job's grows and shrinks are steps of the bar. Above that, the jobs
  are aggregated (not 100,000 bars): rows of consecutive jobs by time bins, each cell the
  mean nodes those jobs held (colour) or the mean number of them waiting (grey).

Series with more changes than :data:`BINS` are drawn as their time-weighted means over
``BINS`` equal bins, so a figure costs about the same at 100k jobs as at 300.
Imported only to draw (matplotlib loads here).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np
from matplotlib.collections import PolyCollection
from matplotlib.patches import Patch
from matplotlib.ticker import MaxNLocator

if TYPE_CHECKING:
    from collections.abc import Sequence


class RunTrace(Protocol):
    """What the figures read of a :class:`malleable.metrics.runtrace.RunTrace` (a protocol,
    so that this module, which runtrace imports to draw, does not import runtrace back)."""

    @property
    def lanes(self) -> Sequence[Any]: ...
    @property
    def submit(self) -> Sequence[float]: ...
    @property
    def start(self) -> Sequence[float]: ...
    @property
    def end(self) -> Sequence[float]: ...
    @property
    def cluster(self) -> Sequence[int]: ...
    @property
    def malleable(self) -> Sequence[int]: ...
    @property
    def step_job(self) -> Sequence[int]: ...
    @property
    def step_time(self) -> Sequence[float]: ...
    @property
    def step_size(self) -> Sequence[int]: ...

#: The most jobs drawn one bar each; above, the Gantt chart is aggregated.
GANTT_BARS = 1500
#: Time bins of a series with more changes than this (and of the aggregated Gantt chart).
BINS = 1200
#: Rows of the aggregated Gantt chart.
ROWS = 400
#: The most clusters drawn one panel each; the others are summed into one panel.
PANELS = 8
COLORS = [f"C{i}" for i in range(10)]  # the default cycle (tab10)


def draw_run(trace: RunTrace, out: Path, title: str = "") -> list[Path]:
    """Draw ``usage.png`` and ``gantt.png`` of ``trace`` in ``out``; the files written."""
    arrays = _Arrays(trace)
    files = [out / "usage.png", out / "gantt.png"]
    _usage(arrays, files[0], title)
    _gantt(arrays, files[1], title)
    return files


class _Arrays:
    """The trace as numpy arrays, each step with its end."""

    def __init__(self, trace: RunTrace) -> None:
        self.lanes = trace.lanes
        self.submit = np.array(trace.submit, dtype=float)
        self.start = np.array(trace.start, dtype=float)
        self.end = np.array(trace.end, dtype=float)
        self.cluster = np.array(trace.cluster, dtype=np.int64)
        self.malleable = np.array(trace.malleable, dtype=bool)
        job = np.array(trace.step_job, dtype=np.int64)
        time = np.array(trace.step_time, dtype=float)
        size = np.array(trace.step_size, dtype=float)
        order = np.lexsort((time, job))
        self.step_job, self.step_time, self.step_size = job[order], time[order], size[order]
        last = np.ones(len(self.step_job), dtype=bool)
        last[:-1] = self.step_job[1:] != self.step_job[:-1]
        after = np.empty_like(self.step_time)
        after[:-1] = self.step_time[1:]
        if len(after):
            after[last] = self.end[self.step_job[last]]
        self.step_end = after
        times = [self.submit, self.end[~np.isnan(self.end)]]
        self.t0 = float(min((t.min() for t in times if t.size), default=0.0))
        self.t1 = float(max((t.max() for t in times if t.size), default=1.0))
        if self.t1 <= self.t0:
            self.t1 = self.t0 + 1.0
        self.hours = self.t1 - self.t0 > 3 * 3600
        self.scale = 3600.0 if self.hours else 1.0
        self.unit = "h" if self.hours else "s"

    def x(self, t: np.ndarray) -> np.ndarray:
        return (t - self.t0) / self.scale

    def waiting(self) -> tuple[np.ndarray, np.ndarray]:
        """The queue length as a step series: (times, value from each time on)."""
        left = np.where(np.isnan(self.start), self.end, self.start)
        left = np.where(np.isnan(left), self.t1, left)
        return _steps(np.concatenate([self.submit, left]),
                      np.concatenate([np.ones(len(left)), -np.ones(len(left))]))

    def busy(self, lanes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Nodes in use on the clusters ``lanes`` (indices) as a step series."""
        on = np.isin(self.cluster[self.step_job], lanes) & ~np.isnan(self.step_end)
        return _steps(np.concatenate([self.step_time[on], self.step_end[on]]),
                      np.concatenate([self.step_size[on], -self.step_size[on]]))


def _steps(times: np.ndarray, deltas: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A step function from changes: its distinct times and its value from each on."""
    if times.size == 0:
        return np.zeros(1), np.zeros(1)
    order = np.argsort(times, kind="stable")
    times, values = times[order], np.cumsum(deltas[order])
    keep = np.ones(times.size, dtype=bool)
    keep[:-1] = times[1:] != times[:-1]  # the value after the last change at a time
    return times[keep], values[keep]


def _binned(times: np.ndarray, values: np.ndarray, t0: float, t1: float,
            bins: int) -> tuple[np.ndarray, np.ndarray]:
    """A step function's time-weighted mean over ``bins`` equal bins of [t0, t1]: the
    bins' left edges and the means (exact: from the integral at the edges)."""
    edges = np.linspace(t0, t1, bins + 1)
    widths = np.diff(times, append=t1)
    area = np.concatenate([[0.0], np.cumsum(values * np.maximum(widths, 0.0))])
    k = np.searchsorted(times, edges, side="right") - 1
    inside = k >= 0
    at = np.zeros(edges.size)
    kk = k[inside]
    at[inside] = area[kk] + values[kk] * (edges[inside] - times[kk])
    return edges[:-1], np.diff(at) / np.diff(edges)


def _series(arrays: _Arrays, times: np.ndarray,
            values: np.ndarray) -> tuple[np.ndarray, np.ndarray, str]:
    """What to draw of a step series: itself, or its bin means when it is long."""
    if times.size <= BINS:
        return arrays.x(np.append(times, arrays.t1)), np.append(values, values[-1]), "post"
    left, means = _binned(times, values, arrays.t0, arrays.t1, BINS)
    return arrays.x(np.append(left, arrays.t1)), np.append(means, means[-1]), "post"


def _panels(arrays: _Arrays) -> list[tuple[str, np.ndarray, int]]:
    """(label, lane indices, nodes) of each cluster panel: the first PANELS - 1 clusters
    alone and the others summed when there are more than PANELS."""
    lanes = arrays.lanes
    if len(lanes) <= PANELS:
        return [(f"{lane.name} ({lane.nodes} nodes)", np.array([i]), lane.nodes)
                for i, lane in enumerate(lanes)]
    alone = [(f"{lane.name} ({lane.nodes} nodes)", np.array([i]), lane.nodes)
             for i, lane in enumerate(lanes[:PANELS - 1])]
    rest = np.arange(PANELS - 1, len(lanes))
    nodes = sum(lanes[int(i)].nodes for i in rest)
    return [*alone, (f"{len(rest)} other clusters ({nodes} nodes)", rest, nodes)]


def _usage(arrays: _Arrays, path: Path, title: str) -> None:
    panels = _panels(arrays)
    fig, axes = plt.subplots(len(panels) + 1, 1, sharex=True,
                             figsize=(11, 1.3 + 1.45 * (len(panels) + 1)), squeeze=False)
    ax = axes[0][0]
    queue = arrays.waiting()
    binned = queue[0].size > BINS
    x, y, where = _series(arrays, *queue)
    ax.step(x, y, where=where, color="tab:red", linewidth=1.0)
    ax.fill_between(x, y, step=where, color="tab:red", alpha=0.25)
    ax.set_ylabel("jobs\nwaiting", rotation=0, ha="right", va="center")
    # an empty queue drawn on 0 to 1 job, not on matplotlib's 0.00 to 0.05 "jobs"
    ax.set_ylim(0, max(1.0, float(np.nanmax(y))) * 1.08)
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    for row, (label, lanes, nodes) in enumerate(panels, start=1):
        ax = axes[row][0]
        color = COLORS[(row - 1) % len(COLORS)]
        x, y, where = _series(arrays, *arrays.busy(lanes))
        ax.fill_between(x, y, step=where, color=color, alpha=0.45, linewidth=0)
        ax.step(x, y, where=where, color=color, linewidth=0.8)
        ax.axhline(nodes, color="black", linestyle="--", linewidth=0.8)
        # a site never observed counts 0 nodes (service.site_nodes): drawn on 0 to 1 node,
        # not on an empty range (matplotlib warns, then picks one)
        ax.set_ylim(0, max(float(nodes), float(np.nanmax(y)) if y.size else 0.0, 1.0) * 1.08)
        ax.set_ylabel(label.replace(" (", "\n("), rotation=0, ha="right", va="center",
                      fontsize=8)
    axes[-1][0].set_xlabel(f"time since the first submission ({arrays.unit})")
    note = (f" (means over {BINS} time bins)" if binned else "")
    fig.suptitle(_heading(title, arrays, f"jobs waiting, and nodes in use per cluster "
                                         f"(dashed: its nodes){note}"), fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _gantt(arrays: _Arrays, path: Path, title: str) -> None:
    if len(arrays.submit) <= GANTT_BARS:
        _gantt_bars(arrays, path, title)
    else:
        _gantt_binned(arrays, path, title)


def _legend(arrays: _Arrays) -> list[Any]:
    used = sorted({int(c) for c in np.unique(arrays.cluster) if c >= 0})
    handles: list[Any] = [Patch(color=COLORS[i % len(COLORS)], label=arrays.lanes[i].name)
                          for i in used[:PANELS]]
    handles.append(Patch(color="0.6", label="waiting"))
    return handles


def _gantt_bars(arrays: _Arrays, path: Path, title: str) -> None:
    n = len(arrays.submit)
    fig, ax = plt.subplots(figsize=(11, max(4.0, min(16.0, 1.5 + n * 0.045))))
    rows = np.arange(n)
    began = np.where(np.isnan(arrays.start), arrays.end, arrays.start)
    began = np.where(np.isnan(began), arrays.t1, began)
    ax.hlines(rows, arrays.x(arrays.submit), arrays.x(began), color="0.6", linewidth=0.6)
    largest = float(arrays.step_size.max()) if arrays.step_size.size else 1.0
    done = ~np.isnan(arrays.step_end)
    job = arrays.step_job[done]
    height = 0.9 * arrays.step_size[done] / largest
    left = arrays.x(arrays.step_time[done])
    width = arrays.x(arrays.step_end[done]) - left
    colors = [COLORS[c % len(COLORS)] if c >= 0 else "black" for c in arrays.cluster[job]]
    _bars(ax, job, left, width, np.maximum(height, 0.08), colors)
    rejected = np.flatnonzero(np.isnan(arrays.start))
    if rejected.size:
        ax.plot(arrays.x(arrays.submit[rejected]), rejected, "x", color="black",
                markersize=4, label="rejected")
    ax.set_ylim(n - 0.5, -0.5)  # the first job at the top
    ax.set_ylabel("jobs, in submission order")
    ax.set_xlabel(f"time since the first submission ({arrays.unit})")
    handles = _legend(arrays)
    ax.legend(handles=handles, loc="upper right", fontsize=8, ncol=2)
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))  # rows are jobs: no row 2.5
    fig.suptitle(_heading(title, arrays, f"{n} jobs: grey while waiting, then a bar as thick "
                                         f"as the job's size (thickest: {largest:.0f} nodes); "
                                         "a malleable job's grows and shrinks are steps"),
                 fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def _bars(ax: Any, y: np.ndarray, left: np.ndarray, width: np.ndarray, height: Any,
          colors: Any) -> None:
    """Horizontal bars as ``ax.barh`` draws them, but as one collection: one artist, not one
    Rectangle each (a patch per bar cost about half the Gantt chart's CPU at 300 jobs, 80 %
    at 1,500)."""
    half = np.broadcast_to(height, y.shape) / 2
    right = left + width
    boxes = np.stack([np.stack([left, y - half], 1), np.stack([left, y + half], 1),
                      np.stack([right, y + half], 1), np.stack([right, y - half], 1)], 1)
    ax.add_collection(PolyCollection(list(boxes), facecolors=colors, linewidths=0))
    ax.set_xlim(left=0.0)  # times from a submission: none before 0


def _spread(row: np.ndarray, a: np.ndarray, b: np.ndarray, weight: np.ndarray,
            grid: np.ndarray, t0: float, width: float) -> None:
    """Add each interval [a, b) of ``weight`` to ``grid[row]``, in time-bin units (a bin's
    cell gets the weight times the fraction of the bin the interval covers)."""
    bins = grid.shape[1]
    u0 = np.clip((a - t0) / width, 0, bins)
    u1 = np.clip((b - t0) / width, 0, bins)
    i0 = np.minimum(np.floor(u0).astype(np.int64), bins - 1)
    i1 = np.minimum(np.floor(u1).astype(np.int64), bins - 1)
    same = i0 == i1
    np.add.at(grid, (row[same], i0[same]), weight[same] * (u1[same] - u0[same]))
    far = ~same
    r, j0, j1, w = row[far], i0[far], i1[far], weight[far]
    np.add.at(grid, (r, j0), w * (j0 + 1 - u0[far]))
    np.add.at(grid, (r, j1), w * (u1[far] - j1))
    inner = np.zeros((grid.shape[0], bins + 1))
    np.add.at(inner, (r, j0 + 1), w)
    np.add.at(inner, (r, j1), -w)
    grid += np.cumsum(inner, axis=1)[:, :bins]


def _gantt_binned(arrays: _Arrays, path: Path, title: str) -> None:
    n = len(arrays.submit)
    rows = min(ROWS, n)
    per_row = -(-n // rows)
    row_of = np.arange(n) // per_row
    width = (arrays.t1 - arrays.t0) / BINS
    held = np.zeros((rows, BINS))
    done = ~np.isnan(arrays.step_end)
    _spread(arrays.step_job[done] // per_row, arrays.step_time[done], arrays.step_end[done],
            arrays.step_size[done], held, arrays.t0, width)
    fig, (left, right) = plt.subplots(1, 2, sharey=True, figsize=(13, 8.5),
                                      layout="constrained")
    extent = (0.0, float(arrays.x(np.array(arrays.t1))), n, 0)
    image = left.imshow(np.ma.masked_where(held <= 0, held), aspect="auto", extent=extent,
                        cmap="viridis", interpolation="nearest")
    fig.colorbar(image, ax=left, label="mean nodes the row's jobs held", location="bottom",
                 shrink=0.6, pad=0.09)
    left.set_ylabel(f"jobs, in submission order ({per_row} a row)")
    left.set_xlabel(f"time since the first submission ({arrays.unit})")
    left.set_title("when each row's jobs ran", fontsize=9)
    # the typical job of each row: its mean wait, then its mean execution, as thick as the
    # row's mean size while running (a malleable row that grew is thicker than its start)
    began = np.where(np.isnan(arrays.start), np.nan, arrays.start)
    wait = _row_mean(row_of, began - arrays.submit, rows)
    execution = _row_mean(row_of, arrays.end - began, rows)
    area = np.zeros(n)
    np.add.at(area, arrays.step_job[done],
              arrays.step_size[done] * (arrays.step_end[done] - arrays.step_time[done]))
    with np.errstate(invalid="ignore", divide="ignore"):
        size = _row_mean(row_of, area / (arrays.end - began), rows)
    centre = (np.arange(rows) + 0.5) * per_row
    scale = 3600.0 if np.nanmax(np.append(wait + execution, 0.0)) > 3 * 3600 else 1.0
    unit = "h" if scale > 1 else "s"
    largest = float(np.nanmax(np.append(size, 1.0)))
    waits = np.nan_to_num(wait) / scale
    _bars(right, centre, np.zeros(rows), waits, per_row * 0.9, "0.6")
    _bars(right, centre, waits, np.nan_to_num(execution) / scale,
          per_row * 0.9 * np.nan_to_num(size) / largest, "tab:blue")
    right.autoscale_view()
    rejected = _row_mean(row_of, np.isnan(arrays.start).astype(float), rows)
    if np.nansum(rejected) > 0:
        hit = rejected > 0
        right.plot(np.zeros(int(hit.sum())), centre[hit], "x", color="black",
                   label="rows with rejected jobs")
    right.set_xlabel(f"time since the job's submission ({unit})")
    right.set_title("the typical job of each row: waits, then runs", fontsize=9)
    right.legend(handles=[Patch(color="0.6", label="mean wait"), Patch(
        color="tab:blue", label=f"mean execution (thickest: {largest:.1f} nodes on average)"),
        *right.get_legend_handles_labels()[0]], loc="upper right", fontsize=8)
    left.set_ylim(n, 0)
    fig.suptitle(_heading(title, arrays, f"{n:,} jobs aggregated ({rows} rows of "
                 f"{per_row} consecutive jobs, {BINS} time bins)"),
                 fontsize=10)
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _heading(title: str, arrays: _Arrays, what: str) -> str:
    """A figure's title: the run's name and when its last job ended (figures of two runs,
    a real one and its simulated twin, have their own time axes: compare the ends), then
    what the figure shows, on a line of its own (one line was cut at both sides)."""
    ended = arrays.end[~np.isnan(arrays.end)]
    last = arrays.x(np.array(float(ended.max()))) if ended.size else None
    end = "" if last is None else f"last job ended at {float(last):,.0f} {arrays.unit}"
    head = "; ".join(part for part in (title, end) if part)
    return f"{head}\n{what}" if head else what


def _row_mean(row: np.ndarray, values: np.ndarray, rows: int) -> np.ndarray:
    """The mean of ``values`` (NaNs left out) over each row; NaN for a row with none."""
    ok = ~np.isnan(values)
    total = np.bincount(row[ok], weights=values[ok], minlength=rows)
    count = np.bincount(row[ok], minlength=rows)
    with np.errstate(invalid="ignore", divide="ignore"):
        return total / count
