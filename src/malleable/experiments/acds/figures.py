"""PNG figures for Figs. 4 to 8 of the AC-DS paper, from a sweep's results."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

import matplotlib
import numpy as np

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from malleable.experiments.acds.plan import FEEDBACK, Results, Settings
from malleable.sim.quantum.engine import Algorithm

FILES = {
    "fig4": "fig4_scalability.png",
    "fig5": "fig5_utilization.png",
    "fig6": "fig6_makespan_ratio.png",
    "fig7": "fig7_quantum_patterns.png",
    "fig8": "fig8_reallocation_cost.png",
}


def draw_all(results: Results, settings: Settings, out: Path,
             drawn: Callable[[str], None] = lambda name: None) -> dict[str, Path]:
    """Draw the five figures into ``out``; their paths by figure. ``drawn`` is called with
    each file's name once it is written (for a progress bar)."""
    painters = {"fig4": _fig4, "fig5": _fig5, "fig6": _fig6, "fig7": _fig7, "fig8": _fig8}
    paths = {}
    for name, paint in painters.items():
        fig = paint(results, settings)
        paths[name] = out / FILES[name]
        fig.savefig(paths[name], dpi=110)
        plt.close(fig)
        drawn(FILES[name])
    return paths


# one (marker, dashes) per curve of a panel, so that curves that coincide still show (hollow
# markers of different shapes) and every legend entry differs also in grayscale print
LOOKS: tuple[tuple[str, str | tuple[int, tuple[int, ...]]], ...] = (
    ("o", "-"), ("s", "--"), ("^", "-."), ("D", ":"), ("v", (0, (6, 2, 1, 2, 1, 2))),
    ("P", (0, (8, 3))), ("X", (0, (2, 1))))


def _panels(count: int, title: str) -> tuple[Figure, list[Axes]]:
    fig, axes = plt.subplots(1, count, figsize=(max(4.2 * count, 6.5), 3.9), squeeze=False,
                             layout="constrained")
    fig.suptitle(title)
    return fig, list(axes[0])


def _curve(ax: Axes, x: Sequence[float], y: Sequence[float] | np.ndarray, index: int,
           label: str) -> None:
    marker, dashes = LOOKS[index % len(LOOKS)]
    ax.plot(x, y, marker=marker, linestyle=dashes, markerfacecolor="none", markersize=6,
            label=label)


def _legend(fig: Figure, axes: list[Axes]) -> None:
    """One legend for the figure, under the panels (the panels share their curves), so that
    it covers no data."""
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncols=min(len(labels), 4),
               fontsize="small")


def _fig4(results: Results, settings: Settings) -> Figure:
    fig, axes = _panels(2, "Fig. 4: makespan as the number of levels K grows")
    for ax, alg in zip(axes, FEEDBACK, strict=True):
        for i, k in enumerate(settings.levels):
            _curve(ax, settings.jobs, results.mean("makespan", k, alg, 1, 0.0, settings.jobs),
                   i, f"K = {k} levels")
        ax.set(title=alg.value, xlabel="number of jobs", ylabel="makespan (quanta L)")
    _legend(fig, axes)
    return fig


def _fig5(results: Results, settings: Settings) -> Figure:
    fig, axes = _panels(len(settings.levels), "Fig. 5: utilization")
    for ax, k in zip(axes, settings.levels, strict=True):
        for i, alg in enumerate(Algorithm):
            _curve(ax, settings.jobs,
                   results.mean("utilization", k, alg, 1, 0.0, settings.jobs), i, alg.value)
        ax.set(title=f"K = {k} levels", xlabel="number of jobs",
               ylabel="utilization (work / allotted processor time)", ylim=(0, 1.02))
    _legend(fig, axes)
    return fig


def _fig6(results: Results, settings: Settings) -> Figure:
    fig, axes = _panels(len(settings.levels), "Fig. 6: makespan normalised to EQUI-EQUI")
    for ax, k in zip(axes, settings.levels, strict=True):
        for i, alg in enumerate(FEEDBACK):
            _curve(ax, settings.jobs,
                   results.ratio(alg, Algorithm.EQUI, k, 1, 0.0, settings.jobs), i,
                   f"{alg.value} / EQUI-EQUI")
        ax.axhline(1.0, color="grey", lw=0.8)
        ax.set(title=f"K = {k} levels", xlabel="number of jobs",
               ylabel="makespan / EQUI-EQUI's makespan")
    _legend(fig, axes)
    return fig


def _fig7(results: Results, settings: Settings) -> Figure:
    costs = settings.fig7_costs
    fig, axes = _panels(len(costs), f"Fig. 7: EQUI-EQUI's makespan / AC-DS's, K = "
                                    f"{settings.deepest} levels")
    for ax, cf in zip(axes, costs, strict=True):
        for i, qf in enumerate(settings.quantum_factors):
            ratio = results.ratio(Algorithm.EQUI, Algorithm.ACDS, settings.deepest, qf, cf,
                                  settings.jobs)
            _curve(ax, settings.jobs, ratio, i, f"QF = {qf}")
        ax.axhline(1.0, color="grey", lw=0.8)
        ax.set(title=f"CF = {cf:g}", xlabel="number of jobs",
               ylabel="EQUI-EQUI makespan / AC-DS makespan")
    _legend(fig, axes)
    return fig


def _fig8(results: Results, settings: Settings) -> Figure:
    fig, axes = _panels(1, f"Fig. 8: EQUI-EQUI's makespan / AC-DS's, {settings.fig8_jobs} "
                           f"jobs, K = {settings.deepest} levels")
    ax = axes[0]
    n = (settings.fig8_jobs,)
    for i, cf in enumerate(settings.fig8_costs):
        ratios = [float(results.ratio(Algorithm.EQUI, Algorithm.ACDS, settings.deepest, qf, cf,
                                      n)[0]) for qf in settings.quantum_factors]
        _curve(ax, settings.quantum_factors, ratios, i, f"CF = {cf:g}")
    ax.axhline(1.0, color="grey", lw=0.8)
    ax.set_xticks(list(settings.quantum_factors))  # QF is a whole number
    ax.set(xlabel="quantum factor QF", ylabel="EQUI-EQUI makespan / AC-DS makespan")
    _legend(fig, axes)
    return fig
