"""Plot helpers (matplotlib, Agg backend): CDFs, step series over time, figure grids.

Every function draws on an ``Axes`` it is given, so that a caller can put panels
in a grid or in files of their own. Nothing here knows about a paper.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
import numpy as np

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Style:
    """How one series looks (matplotlib colour, line style, width, marker).

    ``marker`` (a matplotlib marker, ``None`` for none) is drawn every ``markevery``
    of the axes' diagonal, so that a curve keeps its symbol however many points it has
    and can be told apart in grayscale print as well as in colour.
    """

    color: str = "tab:blue"
    linestyle: str = "-"
    linewidth: float = 1.8
    alpha: float = 1.0
    marker: str | None = None
    markevery: float = 0.1

    def kwargs(self) -> dict[str, Any]:
        """The keyword arguments of ``Axes.plot``/``Axes.step`` for this style."""
        kw: dict[str, Any] = {"color": self.color, "linestyle": self.linestyle,
                              "linewidth": self.linewidth, "alpha": self.alpha}
        if self.marker is not None:
            kw.update(marker=self.marker, markevery=self.markevery, markersize=6,
                      markerfacecolor="white", markeredgecolor=self.color,
                      markeredgewidth=1.4)
        return kw


def cdf(ax: Any, values: Sequence[float], label: str, style: Style = Style()) -> None:
    """Empirical cumulative distribution of ``values`` (NaNs left out) as a step line."""
    data = np.sort(np.asarray([v for v in values if v == v], dtype=float))
    if data.size == 0:
        return
    y = np.arange(1, data.size + 1) / data.size
    ax.step(np.concatenate(([data[0]], data)), np.concatenate(([0.0], y)), where="post",
            label=label, **style.kwargs())
    ax.set_ylim(0, 1.02)
    ax.set_ylabel("fraction of jobs")


def binned_mean(steps: Sequence[tuple[float, float]], width: float,
                end: float | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Time-weighted mean of a step function ``(time, value)`` over bins of ``width``.

    The value holds from each step to the next; before the first step it is 0.
    Returns the bin centres and the means.
    """
    if not steps or width <= 0:
        return np.zeros(0), np.zeros(0)
    times = np.asarray([t for t, _ in steps], dtype=float)
    values = np.asarray([v for _, v in steps], dtype=float)
    stop = float(end if end is not None else times[-1])
    edges = np.arange(0.0, stop + width, width)
    if edges.size < 2:
        edges = np.array([0.0, width])
    # integral of the step function at each edge: cumulative area up to the edge
    area = np.concatenate(([0.0], np.cumsum(values[:-1] * np.diff(times))))
    idx = np.searchsorted(times, edges, side="right") - 1
    at_edges = np.where(idx >= 0, area[np.clip(idx, 0, None)]
                        + values[np.clip(idx, 0, None)] * (edges - times[np.clip(idx, 0, None)]),
                        0.0)
    means = np.diff(at_edges) / width
    return (edges[:-1] + edges[1:]) / 2, means


def series(ax: Any, x: Sequence[float] | np.ndarray, y: Sequence[float] | np.ndarray,
           label: str, style: Style = Style(), step: bool = False) -> None:
    """A line (or a post-step line) over time."""
    if len(x) == 0:
        return
    if step:
        ax.step(x, y, where="post", label=label, **style.kwargs())
    else:
        ax.plot(x, y, label=label, **style.kwargs())


def cumulative(times: Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    """Times sorted, with the running count (for "operations so far" curves)."""
    data = np.sort(np.asarray(times, dtype=float))
    return np.concatenate(([0.0], data)), np.arange(0, data.size + 1)


def finish(ax: Any, title: str, xlabel: str, ylabel: str | None = None,
           legend: bool = True, handlelength: float = 2.0) -> None:
    """Title, labels, grid and legend; a longer ``handlelength`` shows dash patterns."""
    ax.set_title(title, fontsize=11)
    ax.set_xlabel(xlabel)
    if ylabel is not None:
        ax.set_ylabel(ylabel)
    ax.grid(True, alpha=0.3)
    if legend and ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=8, loc="best", framealpha=0.85, handlelength=handlelength)


def grid(rows: int, cols: int, width: float = 5.2, height: float = 3.8) -> tuple[Any, Any]:
    """A figure with a rows x cols grid of axes (flattened)."""
    fig, axes = plt.subplots(rows, cols, figsize=(width * cols, height * rows), squeeze=False)
    return fig, axes.ravel()


def single(width: float = 6.4, height: float = 4.4) -> tuple[Any, Any]:
    fig, ax = plt.subplots(figsize=(width, height))
    return fig, ax


def save(fig: Any, path: Path, title: str | None = None, dpi: int = 110) -> Path:
    """Write ``fig`` as PNG and close it."""
    if title:
        fig.suptitle(title, fontsize=13)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=dpi)
    plt.close(fig)
    logger.info("wrote %s", path)
    return path
