"""The DMRlib study's figures (PNG, matplotlib's Agg backend), numbered as the paper's."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt
from matplotlib.lines import Line2D
from matplotlib.patches import Patch
from matplotlib.ticker import FormatStrFormatter, LogLocator, NullFormatter

from malleable.experiments.dmrlib.report import speedups
from malleable.experiments.dmrlib.results import VERSIONS, Study
from malleable.experiments.dmrlib.study import completed_per_bin
from malleable.workloads.dmrlib import Submission, Version
from malleable.workloads.dmrlib_apps import APPS, CAP, THRESHOLD, gain_differences

COLORS = {Version.FIXED: "#7f7f7f", Version.PURE_MOLDABLE: "#d62728",
          Version.PURE_MALLEABLE: "#1f77b4", Version.FLEXIBLE: "#2ca02c"}
#: Bar hatches, so that the four versions differ in grayscale print too.
HATCHES = {Version.FIXED: "", Version.PURE_MOLDABLE: "//", Version.PURE_MALLEABLE: "..",
           Version.FLEXIBLE: "xx"}
LINES: dict[Version, Literal["-", "--"]] = {Version.PURE_MOLDABLE: "-", Version.FLEXIBLE: "--"}
#: The figures drawn, in order (each a function of the study and the output directory).
FIGURES = ("fig3", "fig4", "fig5", "fig8", "fig9", "fig10")


def version_label(version: Version) -> str:
    """A version with the submission mode its jobs use (Table 3), for legends."""
    return f"{version.value} ({VERSIONS[version][0].value} submission)"


#: Said under the title of Figs. 8-10, whose bars mix both submission modes.
SUBMISSION_NOTE = ("fixed and pure malleable jobs are submitted rigid, "
                   "pure moldable and flexible ones moldable")


def draw_figures(study: Study, out: Path,
                 advance: Callable[[str], None] | None = None) -> list[Path]:
    """Write every figure to ``out``; return their paths. ``advance`` is called with a
    figure's name after it is written (for a progress bar)."""
    drawers: dict[str, Callable[[], Path]] = {
        "fig3": lambda: fig3_gains(out), "fig4": lambda: fig4_speedups(study, out),
        "fig5": lambda: fig5_evolution(study, out), "fig8": lambda: fig8_workload(study, out),
        "fig9": lambda: fig9_allocation(study, out), "fig10": lambda: fig10_energy(study, out)}
    paths = []
    for name in FIGURES:
        paths.append(drawers[name]())
        if advance is not None:
            advance(name)
    return paths


def _save(fig: Any, path: Path, rect: tuple[float, float, float, float] | None = None
          ) -> Path:
    fig.tight_layout(rect=rect)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def fig3_gains(out: Path) -> Path:
    """Gain difference of our application curves with the 10% threshold (Fig. 3).

    The x axis is categorical (process counts are not evenly spaced) but in numeric order:
    every count of every application has one place, and each curve goes through its own.
    """
    fig, ax = plt.subplots(figsize=(7, 4))
    curves = [(app, [(n, s) for n, s in gain_differences(app.table) if n <= CAP])
              for app in APPS]
    counts = sorted({n for _, gains in curves for n, _ in gains})
    place = {n: i for i, n in enumerate(counts)}
    for (app, gains), marker in zip(curves, "os^Dv", strict=False):
        ax.plot([place[n] for n, _ in gains], [s for _, s in gains], marker=marker,
                label=app.label)
    ax.set_xticks(range(len(counts)), [str(n) for n in counts])
    ax.axhline(THRESHOLD, color="black", linewidth=2.5, label=f"{THRESHOLD:g}% threshold")
    ax.axhline(0, color="grey", linewidth=0.8)
    ax.set(xlabel="processes", ylabel="gain difference (%)",
           title="Fig. 3 (our curves): gain difference and the 10% threshold")
    ax.legend()
    return _save(fig, out / "fig3_gain_difference.png")


SPEEDUP_LOOKS = {"wait": ("#ff7f0e", "^"), "execution": ("#9467bd", "s"),
                 "completion": ("#1f77b4", "o")}


def fig4_speedups(study: Study, out: Path) -> Path:
    """Speedups of the malleable workloads over their counterparts (Fig. 4).

    A marker per quantity and dashes per submission mode (also in grayscale); a log axis, on
    which a speedup and a slowdown of the same factor lie equally far from 1; the legend under
    the plot; a note under it for each point that cannot be drawn (no wait at all)."""
    fig, ax = plt.subplots(figsize=(7, 5.2))
    x = [str(n) for n in study.sizes]
    missing: list[str] = []
    for sub, style in ((Submission.RIGID, ":"), (Submission.MOLDABLE, "-")):
        for metric, (color, marker) in SPEEDUP_LOOKS.items():
            values = [speedups(study, n, sub)[metric] for n in study.sizes]
            for n, v in zip(study.sizes, values, strict=True):
                if not math.isfinite(v):
                    why = ("neither workload waited" if math.isnan(v)
                           else "the malleable workload never waited (infinite speedup)")
                    missing.append(f"{metric} ({sub.value}) at {n} jobs: {why}")
            ax.plot(x, [v if math.isfinite(v) else math.nan for v in values],
                    linestyle=style, color=color, marker=marker, markersize=7,
                    markerfacecolor="none" if sub is Submission.RIGID else color,
                    linewidth=1.5 if sub is Submission.RIGID else 2.5,
                    label=f"{metric} ({sub.value} submission)")
    ax.axhline(1, color="grey", linewidth=0.8)
    ax.set_yscale("log")
    ax.yaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    ax.yaxis.set_major_formatter(FormatStrFormatter("%g"))
    ax.yaxis.set_minor_formatter(NullFormatter())
    ax.set(xlabel="jobs in the workload",
           ylabel="speedup: non-malleable / malleable time\n(above 1: malleability helps)",
           title="Fig. 4: malleable vs non-malleable, by submission mode")
    ax.legend(fontsize=8, ncol=2, loc="upper center", bbox_to_anchor=(0.5, -0.16))
    if missing:
        fig.text(0.01, 0.01, "not drawn: " + "; ".join(missing), fontsize=7, wrap=True)
    return _save(fig, out / "fig4_speedups.png", rect=(0, 0.04 if missing else 0, 1, 1))


def fig5_evolution(study: Study, out: Path) -> Path:
    """Allocated nodes, running jobs and completed jobs over time, pure moldable vs flexible.

    One quantity (and unit) per panel; lines, not overlapping fills; completed jobs as
    side-by-side bars; one legend under the panels, where it covers no data.
    """
    n = study.table7_jobs
    fig, (nodes, running, done) = plt.subplots(3, 1, figsize=(8, 8), sharex=True)
    versions = (Version.PURE_MOLDABLE, Version.FLEXIBLE)
    width = max(1.0, max(study.version(n, v).workload_time for v in versions) / 60)
    handles: list[Any] = []
    for i, version in enumerate(versions):
        o = study.version(n, version)
        color, dashes = COLORS[version], LINES[version]
        if o.busy:
            nodes.step([t for t, _ in o.busy], [b for _, b in o.busy], where="post",
                       color=color, linestyle=dashes, linewidth=1.4)
        if o.running:
            running.step([t for t, _ in o.running], [c for _, c in o.running], where="post",
                         color=color, linestyle=dashes, linewidth=1.6)
        bins = completed_per_bin(o.ends, width)
        done.bar([t + i * width / 2 for t, _ in bins], [c for _, c in bins], width=width / 2,
                 align="edge", color=color, hatch=HATCHES[version], edgecolor="white",
                 linewidth=0)
        handles += [Line2D([], [], color=color, linestyle=dashes,
                           label=f"{version.value}: allocated nodes, running jobs"),
                    Patch(facecolor=color, hatch=HATCHES[version], edgecolor="white",
                          label=f"{version.value}: jobs completed")]
    nodes.set(ylabel="allocated nodes", ylim=(0, 134),
              title=f"Fig. 5: {n}-job workload, moldable submission")
    running.set(ylabel="running jobs")
    running.set_ylim(bottom=0)
    done.set(xlabel="time (s)", ylabel=f"jobs completed\nper {width:.0f} s")
    for ax in (nodes, running, done):
        ax.grid(True, alpha=0.3)
    fig.legend(handles=handles, loc="lower center", ncol=2, fontsize=9, frameon=False)
    return _save(fig, out / "fig5_evolution.png", rect=(0, 0.07, 1, 1))


def _bars(ax: Any, study: Study, value: Any, ylabel: str) -> None:
    width = 0.2
    for i, version in enumerate(VERSIONS):
        xs = [k + (i - 1.5) * width for k in range(len(study.sizes))]
        ax.bar(xs, [value(study.version(n, version)) for n in study.sizes], width,
               color=COLORS[version], hatch=HATCHES[version], edgecolor="white",
               linewidth=0, label=version_label(version))
    ax.set_xticks(range(len(study.sizes)), [str(n) for n in study.sizes])
    ax.set(xlabel="jobs in the workload", ylabel=ylabel)


def _legend_below(fig: Any, axes: Any, ncol: int = 2) -> None:
    """One legend for ``axes`` (a list), under the plots, where it covers no bar."""
    handles: list[Any] = []
    labels: list[str] = []
    for ax in axes:
        h, lab = ax.get_legend_handles_labels()
        handles += h
        labels += lab
    fig.legend(handles, labels, loc="lower center", ncol=ncol, fontsize=8, frameon=False)


def fig8_workload(study: Study, out: Path) -> Path:
    """Workload completion time with the rigid speedup line, and mean execution time."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 5.2))
    _bars(left, study, lambda o: o.workload_time, "workload completion time (s)")
    twin = left.twinx()
    ratio = [study.version(n, Version.FIXED).workload_time
             / study.version(n, Version.PURE_MALLEABLE).workload_time for n in study.sizes]
    twin.plot(range(len(study.sizes)), ratio, color="black", marker="o", linestyle="-",
              label="speedup, fixed / pure malleable (right axis)")
    twin.set_ylabel("speedup")
    # room above the highest point, so that no marker is cut by the frame
    twin.set_ylim(0, max([1.0, *ratio]) * 1.15)
    left.set_title("Fig. 8a: workload completion time")
    _bars(right, study, lambda o: o.mean_execution, "mean job execution time (s)")
    right.set_title("Fig. 8b: mean job execution time")
    fig.suptitle(f"Fig. 8 — {SUBMISSION_NOTE}", fontsize=10)
    _legend_below(fig, [left, twin], ncol=3)
    return _save(fig, out / "fig8_workload_time.png", rect=(0, 0.1, 1, 1))


def fig9_allocation(study: Study, out: Path) -> Path:
    """Resource allocation rate per workload (Fig. 9)."""
    fig, ax = plt.subplots(figsize=(7, 4.8))
    _bars(ax, study, lambda o: 100.0 * o.allocation, "allocation rate (%)")
    ax.set_ylim(0, 105)
    ax.set_title(f"Fig. 9: resource allocation rate\n{SUBMISSION_NOTE}", fontsize=10)
    _legend_below(fig, [ax])
    return _save(fig, out / "fig9_allocation.png", rect=(0, 0.12, 1, 1))


def fig10_energy(study: Study, out: Path) -> Path:
    """Energy of each workload relative to the fixed one (Appendix B, Fig. 10)."""
    fig, ax = plt.subplots(figsize=(7, 4.8))
    _bars(ax, study, lambda o: o.energy, "energy (kWh)")
    top = 0.0
    for k, n in enumerate(study.sizes):
        fixed = study.version(n, Version.FIXED).energy
        for i, version in enumerate(VERSIONS):
            e = study.version(n, version).energy
            top = max(top, e)
            ax.annotate(f"{e / fixed:.0%}", (k + (i - 1.5) * 0.2, e), ha="center",
                        va="bottom", fontsize=6)
    ax.set_ylim(0, top * 1.1 if top > 0 else 1.0)
    ax.set_title("Fig. 10: energy (idle 100 W, loaded 340 W), share of fixed\n"
                 f"{SUBMISSION_NOTE}", fontsize=10)
    _legend_below(fig, [ax])
    return _save(fig, out / "fig10_energy.png", rect=(0, 0.12, 1, 1))
