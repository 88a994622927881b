"""The DMRlib study's figures (PNG, matplotlib's Agg backend), numbered as the paper's."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

from malleable.experiments.dmrlib.report import speedups
from malleable.experiments.dmrlib.results import VERSIONS, Study
from malleable.experiments.dmrlib.study import completed_per_bin
from malleable.workloads.dmrlib import Submission, Version
from malleable.workloads.dmrlib_apps import APPS, CAP, THRESHOLD, gain_differences

COLORS = {Version.FIXED: "#7f7f7f", Version.PURE_MALLEABLE: "#1f77b4",
          Version.PURE_MOLDABLE: "#d62728", Version.FLEXIBLE: "#2ca02c"}


def draw_figures(study: Study, out: Path) -> list[Path]:
    """Write every figure to ``out``; return their paths."""
    paths = [fig3_gains(out), fig4_speedups(study, out), fig5_evolution(study, out),
             fig8_workload(study, out), fig9_allocation(study, out), fig10_energy(study, out)]
    return paths


def _save(fig: Any, path: Path) -> Path:
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def fig3_gains(out: Path) -> Path:
    """Gain difference of our application curves with the 10% threshold (Fig. 3)."""
    fig, ax = plt.subplots(figsize=(7, 4))
    for app in APPS:
        gains = [(n, s) for n, s in gain_differences(app.table) if n <= CAP]
        ax.plot([str(n) for n, _ in gains], [s for _, s in gains], marker="o", label=app.label)
    ax.axhline(THRESHOLD, color="black", linewidth=2.5)
    ax.axhline(0, color="grey", linewidth=0.8)
    ax.set(xlabel="processes", ylabel="gain difference (%)",
           title="Fig. 3 (our curves): gain difference and the 10% threshold")
    ax.legend()
    return _save(fig, out / "fig3_gain_difference.png")


def fig4_speedups(study: Study, out: Path) -> Path:
    """Speedups of the malleable workloads over their counterparts (Fig. 4)."""
    fig, ax = plt.subplots(figsize=(7, 4.5))
    x = [str(n) for n in study.sizes]
    for sub, style in ((Submission.RIGID, ":"), (Submission.MOLDABLE, "-")):
        for metric, color in (("wait", "#ff7f0e"), ("execution", "#9467bd"),
                              ("completion", "#1f77b4")):
            values = [speedups(study, n, sub)[metric] for n in study.sizes]
            ax.plot(x, values, linestyle=style, color=color, marker="o",
                    linewidth=1.5 if sub is Submission.RIGID else 2.5,
                    label=f"{metric} ({sub.value})")
    ax.axhline(1, color="grey", linewidth=0.8)
    ax.set(xlabel="jobs in the workload", ylabel="speedup thanks to malleability",
           title="Fig. 4: malleable vs non-malleable, by submission mode")
    ax.legend(fontsize=8, ncol=2)
    return _save(fig, out / "fig4_speedups.png")


def fig5_evolution(study: Study, out: Path) -> Path:
    """Allocated nodes, running and completed jobs over time, pure moldable vs flexible."""
    n = study.table7_jobs
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(8, 6), sharex=True)
    versions = (Version.PURE_MOLDABLE, Version.FLEXIBLE)
    width = max(1.0, max(study.version(n, v).workload_time for v in versions) / 100)
    for version in versions:
        o = study.version(n, version)
        color = COLORS[version]
        if o.busy:
            top.fill_between([t for t, _ in o.busy], [b for _, b in o.busy], step="post",
                             alpha=0.25, color=color, label=f"allocated nodes ({version.value})")
        if o.running:
            top.step([t for t, _ in o.running], [c for _, c in o.running], where="post",
                     color=color, label=f"running jobs ({version.value})")
        bins = completed_per_bin(o.ends, width)
        bottom.bar([t for t, _ in bins], [c for _, c in bins], width=width, align="edge",
                   alpha=0.5, color=color, label=version.value)
    top.set(ylabel="nodes / jobs", title=f"Fig. 5: {n}-job workload, moldable submission")
    top.legend(fontsize=8)
    bottom.set(xlabel="time (s)", ylabel=f"jobs completed per {width:.0f} s")
    bottom.legend(fontsize=8)
    return _save(fig, out / "fig5_evolution.png")


def _bars(ax: Any, study: Study, value: Any, ylabel: str) -> None:
    width = 0.2
    for i, version in enumerate(VERSIONS):
        xs = [k + (i - 1.5) * width for k in range(len(study.sizes))]
        ax.bar(xs, [value(study.version(n, version)) for n in study.sizes], width,
               color=COLORS[version], label=version.value)
    ax.set_xticks(range(len(study.sizes)), [str(n) for n in study.sizes])
    ax.set(xlabel="jobs in the workload", ylabel=ylabel)


def fig8_workload(study: Study, out: Path) -> Path:
    """Workload completion time with the rigid speedup line, and mean execution time."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.5))
    _bars(left, study, lambda o: o.workload_time, "workload completion time (s)")
    twin = left.twinx()
    ratio = [study.version(n, Version.FIXED).workload_time
             / study.version(n, Version.PURE_MALLEABLE).workload_time for n in study.sizes]
    twin.plot(range(len(study.sizes)), ratio, color="#1f77b4", marker="o",
              label="speedup fixed / pure malleable")
    twin.set_ylabel("speedup")
    twin.set_ylim(bottom=0)
    left.set_title("Fig. 8a: workload completion time")
    left.legend(fontsize=8, loc="upper left")
    twin.legend(fontsize=8, loc="center left")
    _bars(right, study, lambda o: o.mean_execution, "mean job execution time (s)")
    right.set_title("Fig. 8b: mean job execution time")
    return _save(fig, out / "fig8_workload_time.png")


def fig9_allocation(study: Study, out: Path) -> Path:
    """Resource allocation rate per workload (Fig. 9)."""
    fig, ax = plt.subplots(figsize=(7, 4))
    _bars(ax, study, lambda o: 100.0 * o.allocation, "allocation rate (%)")
    ax.set_ylim(0, 105)
    ax.set_title("Fig. 9: resource allocation rate")
    ax.legend(fontsize=8, loc="lower right")
    return _save(fig, out / "fig9_allocation.png")


def fig10_energy(study: Study, out: Path) -> Path:
    """Energy of each workload relative to the fixed one (Appendix B, Fig. 10)."""
    fig, ax = plt.subplots(figsize=(7, 4))
    _bars(ax, study, lambda o: o.energy, "energy (kWh)")
    for k, n in enumerate(study.sizes):
        fixed = study.version(n, Version.FIXED).energy
        for i, version in enumerate(VERSIONS):
            e = study.version(n, version).energy
            ax.annotate(f"{e / fixed:.0%}", (k + (i - 1.5) * 0.2, e), ha="center",
                        va="bottom", fontsize=6)
    ax.set_title("Fig. 10: energy (idle 100 W, loaded 340 W), share of fixed")
    ax.legend(fontsize=8)
    return _save(fig, out / "fig10_energy.png")
