"""Figures of ``malleable experiment coorm`` (matplotlib, Agg): Figs. 6 and 7."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

PANELS = (("computed", "computed configurations"), ("cpu_time_s", "scheduling CPU time (s)"),
          ("cdr_mb", "total message size (MB, CDR-like)"))
STYLE = {"oar_W0": ("OAR-like, W0", "k", "s"), "coorm_W0": ("CooRM, W0", "tab:blue", "o"),
         "coorm_W1": ("CooRM, W1", "tab:green", "^"), "coorm_W2": ("CooRM, W2", "tab:red", "v"),
         "coorm_W3": ("CooRM, W3", "tab:purple", "D")}
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")


def draw_fig6(summary: dict[str, Any], path: Path) -> None:
    """Median with quartile bars and min-max whiskers, per series, against nC."""
    fig6 = summary["fig6"]
    counts = sorted(int(nc) for nc in fig6)
    fig, axes = plt.subplots(1, len(PANELS), figsize=(15, 5), layout="constrained")
    for ax, (metric, label) in zip(axes, PANELS, strict=True):
        for k, (series, (name, color, marker)) in enumerate(STYLE.items()):
            xs, med, low, high, lo, hi = [], [], [], [], [], []
            for nc in counts:
                q = fig6[str(nc)].get(series, {}).get(metric)
                if not q or (metric == "cdr_mb" and series == "oar_W0" and q["max"] == 0):
                    continue
                xs.append(nc + (k - 2) * 0.07)
                med.append(q["median"])
                low.append(q["median"] - q["q1"])
                high.append(q["q3"] - q["median"])
                lo.append(q["min"])
                hi.append(q["max"])
            if not xs:
                continue
            ax.errorbar(xs, med, yerr=[low, high], color=color, marker=marker, capsize=3,
                        label=name, linewidth=1.2)
            ax.vlines(xs, lo, hi, color=color, alpha=0.35)
        ax.set_yscale("log")
        ax.set_xlabel("number of clusters nC")
        ax.set_ylabel(label)
        ax.set_xticks(counts)
        ax.grid(True, which="both", alpha=0.3)
    # one legend under the panels (they share their series), so that it covers no data
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncols=len(labels), fontsize=9)
    fig.suptitle("CooRM vs the OAR-like moldable scheduler (cf. the paper's Fig. 6): median "
                 "(marker), quartiles (bar), min to max (pale line) over the instances; "
                 "series side by side at each nC", fontsize=10)
    fig.savefig(path, dpi=110)
    plt.close(fig)


def draw_fig7(summary: dict[str, Any], path: Path) -> None:
    """Empirical CDF of the CEM's end-time increase, one curve per adaptation delay."""
    fig7 = summary["fig7"]
    fig, ax = plt.subplots(figsize=(8, 4.5), layout="constrained")
    cmap = plt.get_cmap("viridis")
    delays = [d for d in fig7["increase_s"] if float(d) > 0]
    for i, delay in enumerate(delays):
        values = fig7["increase_s"][delay]
        if not values:
            continue
        xs = [values[0], *values]  # the curve starts at 0 at the smallest value
        ys = [0.0] + [(k + 1) / len(values) for k in range(len(values))]
        style = "--" if float(delay) > fig7["fair_start"] else "-"
        # a marker per delay, so that curves stay apart in grayscale and where they coincide
        ax.step(xs, ys, where="post", linestyle=style, color=cmap(i / max(1, len(delays))),
                marker=MARKERS[i % len(MARKERS)], markerfacecolor="none",
                label=f"delay {delay} s{' (no increase)' if max(values) == 0 else ''}")
    ax.set_xscale("symlog", linthresh=1.0)
    ax.set_xlabel("end-time increase of the CEM application (s)")
    ax.set_ylabel("fraction of instances")
    ax.set_title(f"cf. the paper's Fig. 7: W1 on {fig7['clusters']} clusters, fair-start "
                 f"{fig7['fair_start']:g} s (dashed: delay > fair-start)", fontsize=10)
    ax.grid(True, alpha=0.3)
    fig.legend(fontsize=8, loc="outside right upper")  # beside the axes: covers no curve
    fig.savefig(path, dpi=110)
    plt.close(fig)
