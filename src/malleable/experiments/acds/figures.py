"""PNG figures for Figs. 4 to 8 of the AC-DS paper, from a sweep's results."""

from __future__ import annotations

from pathlib import Path

import matplotlib

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


def draw_all(results: Results, settings: Settings, out: Path) -> dict[str, Path]:
    """Draw the five figures into ``out``; their paths by figure."""
    painters = {"fig4": _fig4, "fig5": _fig5, "fig6": _fig6, "fig7": _fig7, "fig8": _fig8}
    paths = {}
    for name, paint in painters.items():
        fig = paint(results, settings)
        paths[name] = out / FILES[name]
        fig.savefig(paths[name], dpi=110)
        plt.close(fig)
    return paths


def _panels(count: int, title: str) -> tuple[Figure, list[Axes]]:
    fig, axes = plt.subplots(1, count, figsize=(4.2 * count, 3.6), squeeze=False,
                             layout="constrained")
    fig.suptitle(title)
    return fig, list(axes[0])


def _fig4(results: Results, settings: Settings) -> Figure:
    fig, axes = _panels(2, "Fig. 4: makespan as the number of levels grows")
    for ax, alg in zip(axes, FEEDBACK, strict=True):
        for k in settings.levels:
            ax.plot(settings.jobs, results.mean("makespan", k, alg, 1, 0.0, settings.jobs),
                    marker=".", label=f"K = {k}")
        ax.set(title=alg.value, xlabel="number of jobs", ylabel="makespan (quanta L)")
        ax.legend(fontsize="small")
    return fig


def _fig5(results: Results, settings: Settings) -> Figure:
    fig, axes = _panels(len(settings.levels), "Fig. 5: utilization")
    for ax, k in zip(axes, settings.levels, strict=True):
        for alg in Algorithm:
            ax.plot(settings.jobs, results.mean("utilization", k, alg, 1, 0.0, settings.jobs),
                    marker=".", label=alg.value)
        ax.set(title=f"K = {k}", xlabel="number of jobs", ylabel="utilization", ylim=(0, 1.02))
        ax.legend(fontsize="small")
    return fig


def _fig6(results: Results, settings: Settings) -> Figure:
    fig, axes = _panels(len(settings.levels), "Fig. 6: makespan normalised to EQUI-EQUI")
    for ax, k in zip(axes, settings.levels, strict=True):
        for alg in FEEDBACK:
            ax.plot(settings.jobs, results.ratio(alg, Algorithm.EQUI, k, 1, 0.0, settings.jobs),
                    marker=".", label=f"{alg.value} / EQUI-EQUI")
        ax.axhline(1.0, color="grey", lw=0.8)
        ax.set(title=f"K = {k}", xlabel="number of jobs", ylabel="makespan ratio")
        ax.legend(fontsize="small")
    return fig


def _fig7(results: Results, settings: Settings) -> Figure:
    costs = settings.fig7_costs
    fig, axes = _panels(len(costs), f"Fig. 7: EQUI-EQUI / AC-DS, K = {settings.deepest}")
    for ax, cf in zip(axes, costs, strict=True):
        for qf in settings.quantum_factors:
            ratio = results.ratio(Algorithm.EQUI, Algorithm.ACDS, settings.deepest, qf, cf,
                                  settings.jobs)
            ax.plot(settings.jobs, ratio, marker=".", label=f"QF = {qf}")
        ax.axhline(1.0, color="grey", lw=0.8)
        ax.set(title=f"CF = {cf:g}", xlabel="number of jobs", ylabel="makespan ratio")
        ax.legend(fontsize="small")
    return fig


def _fig8(results: Results, settings: Settings) -> Figure:
    fig, axes = _panels(1, f"Fig. 8: EQUI-EQUI / AC-DS, {settings.fig8_jobs} jobs, "
                           f"K = {settings.deepest}")
    ax = axes[0]
    n = (settings.fig8_jobs,)
    for cf in settings.fig8_costs:
        ratios = [float(results.ratio(Algorithm.EQUI, Algorithm.ACDS, settings.deepest, qf, cf,
                                      n)[0]) for qf in settings.quantum_factors]
        ax.plot(settings.quantum_factors, ratios, marker="o", label=f"CF = {cf:g}")
    ax.axhline(1.0, color="grey", lw=0.8)
    ax.set(xlabel="quantum factor QF", ylabel="makespan ratio")
    ax.legend(fontsize="small")
    return fig
