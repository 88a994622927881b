"""Figures and report.md of ``experiment elastic`` (from its summary)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from malleable.experiments.elastic.runs import BY_KEY
from malleable.experiments.elastic.workload import __doc__ as RULE

METRICS = ("turnaround", "makespan", "wait", "utilization")
LABELS = {"turnaround": "mean turnaround", "makespan": "makespan", "wait": "mean wait",
          "utilization": "node utilization"}


def draw(summary: dict[str, Any], out: Path) -> list[Path]:
    """``elastic_changes.png`` (the four metrics' changes vs the baseline against the
    malleable fraction, one line per policy, min-max over seeds as error bars, the paper's
    range shaded) and one PNG per metric."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    paths = []
    fig, axes = plt.subplots(2, 2, figsize=(12, 8.5))
    for ax, metric in zip(axes.flat, METRICS, strict=True):
        _panel(ax, summary, metric)
    handles, labels = axes.flat[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=5, fontsize=8)
    fig.suptitle(f"{summary['log']}: change vs {_baseline(summary)} "
                 f"({len(summary['seeds'])} seeds, days {summary['slice_start_day']:g}+"
                 f"{summary['slice_days']:g})")
    fig.tight_layout(rect=(0, 0.07, 1, 0.96))
    paths.append(out / "elastic_changes.png")
    fig.savefig(paths[-1], dpi=100)
    plt.close(fig)
    for metric in METRICS:
        fig, ax = plt.subplots(figsize=(7, 4.5))
        _panel(ax, summary, metric)
        ax.legend(fontsize=7, ncol=2)
        fig.tight_layout()
        paths.append(out / f"elastic_{metric}.png")
        fig.savefig(paths[-1], dpi=100)
        plt.close(fig)
    return paths


def _panel(ax: Any, summary: dict[str, Any], metric: str) -> None:
    low, high = summary["paper"][metric]
    ax.axhspan(low, high, color="tab:green", alpha=0.12, label="2026 paper's range (best)")
    ax.axhline(0, color="black", linewidth=0.8)
    import matplotlib

    colors = matplotlib.colormaps["tab20"]
    for i, policy in enumerate(summary["policies"]):
        per = summary["results"][policy]
        xs = [f for f in summary["fractions"] if f"{f:g}" in per]
        means = [per[f"{f:g}"][metric]["change"] for f in xs]
        # (clamped at 0: a mean over equal values may differ from them in the last bit)
        below = [max(0.0, m - per[f"{f:g}"][metric]["min"])
                 for f, m in zip(xs, means, strict=True)]
        above = [max(0.0, per[f"{f:g}"][metric]["max"] - m)
                 for f, m in zip(xs, means, strict=True)]
        ax.errorbar(xs, means, yerr=[below, above], marker="osD^v"[i % 5], capsize=3,
                    label=policy, linewidth=1.2, color=colors(i % 20),
                    linestyle=("-", "--", ":")[i // 7 % 3])  # no two policies look alike
    ax.set_xlabel("malleable jobs (%)")
    ax.set_ylabel(f"{LABELS[metric]}: change vs baseline (%)")
    ax.set_title(LABELS[metric])
    ax.grid(alpha=0.3)


def _baseline(summary: dict[str, Any]) -> str:
    """What the baseline is, in words (EASY before ``baseline_policy`` was kept)."""
    return BY_KEY[summary.get("baseline_policy", "easy-rigid")].what


def _pct(value: float) -> str:
    return f"{value:+.1f}%"


def own_zero(summary: dict[str, Any], policy: str, fraction: str, metric: str) -> float:
    """The change of ``policy`` at ``fraction`` against its own run at 0% (the rigid log
    under the same placement): malleability's own part, in % (NaN without a 0% run)."""
    per = summary["results"][policy]
    if "0" not in per or fraction not in per:
        return float("nan")
    zero, value = per["0"][metric]["change"], per[fraction][metric]["change"]
    return ((1 + value / 100) / (1 + zero / 100) - 1) * 100 if zero > -100 else float("nan")


def why(summary: dict[str, Any]) -> list[str]:
    """What the numbers say about why we fall where we do."""
    base = summary["baseline"]
    top = f"{summary['fractions'][-1]:g}"
    lines = ["## Why we fall where we do", ""]
    bound = (base["makespan"] - base["last_submit"]) / base["makespan"] * 100
    lines.append(
        f"- **Makespan is bound by the arrivals.** The slice's last job is submitted "
        f"{base['last_submit']:.0f} s after its first, and the baseline's makespan is "
        f"{base['makespan']:.0f} s: no policy can cut it by more than {bound:.1f}% (the tail "
        "after the last submit). The paper's makespan gains need a queue that outlasts the "
        "arrivals (a saturated machine, or a trace cut differently); we cannot tell which.")
    zero = [p for p in summary["policies"] if "0" in summary["results"][p]
            and abs(summary["results"][p]["0"]["turnaround"]["change"]) > 1]
    if zero:
        lines.append(
            "- **Part of the gain is the placement, not malleability.** With no malleable job "
            "(0%), these policies already differ from the baseline: " + "; ".join(
                f"{p} {_pct(summary['results'][p]['0']['turnaround']['change'])} turnaround"
                for p in zero) + " (their placement lets later jobs start whenever they fit, "
            "with no reservation for the queue's head). Against each policy's own 0% run, "
            f"malleability at {top}% changes turnaround by: " + "; ".join(
                f"{p} {_pct(own_zero(summary, p, top, 'turnaround'))}"
                for p in summary["policies"] if top in summary["results"][p]) + ".")
    ups = [(p, summary["results"][p][top]["utilization"]["change"],
            summary["results"][p][top]["node_seconds"]) for p in summary["policies"]
           if top in summary["results"][p]]
    if ups:
        p, util, area = max(ups, key=lambda u: u[1])
        lines.append(
            f"- **Higher utilization is more node-seconds for the same work.** The log's jobs "
            "are the same in every run; with the makespan fixed by the arrivals, utilization "
            f"rises only as the jobs use more node-seconds. At {top}%, {p}'s utilization "
            f"{_pct(util)} comes with {_pct(area)} node-seconds: jobs grown past their logged "
            "size run less efficiently under the speed-up rule (50% efficient at the logged "
            "size, less above). The paper's utilization gains may be of the same kind or "
            "come from a shorter makespan; its abstract does not say.")
    return lines


def write_report(summary: dict[str, Any], out: Path) -> Path:
    base = summary["baseline"]
    fractions = [f"{f:g}" for f in summary["fractions"]]
    lines = [
        "# Malleability on a real log: the 2026 study's design",
        "",
        f"`malleable experiment elastic`: {summary['log']} ({summary['nodes']} nodes), days "
        f"{summary['slice_start_day']:g} to {summary['slice_start_day'] + summary['slice_days']:g}"
        f" of the log ({summary['jobs']} jobs), malleable fractions "
        f"{', '.join(fractions)}%, seeds {', '.join(str(s) for s in summary['seeds'])}; "
        f"{summary['simulations']} simulations in {summary['elapsed_s']:.0f} s. Design of Zojer, "
        "Posner and Ozden, \"Evaluating Malleable Job Scheduling in HPC Clusters using "
        "Real-World Workloads\" (arXiv 2602.17318, 2026), whose text beyond its abstract is not "
        "part of this repository: the conversion rule, the speed-up model and the policies "
        "below are ours, not theirs (they used ElastiSim and five strategies of their own).",
        "",
        "## Setting",
        "",
        "- **Platform**: one cluster of the log machine's nodes; a node is the unit.",
        "- **Slice**: the log's jobs submitted in the slice (times from its first submit); the "
        "machine starts empty (no backlog from before the slice). Jobs are read by "
        "`malleable.workloads.reallog` (its oddity rules in docs/simulate.md).",
        f"- **Baseline**: {_baseline(summary)}: turnaround "
        f"{base['turnaround']:.0f} s, makespan {base['makespan']:.0f} s, wait "
        f"{base['wait']:.0f} s, utilization {base['utilization']:.1%}.",
        f"- **Malleable sizes**: `--size-range {summary.get('size_range', 'logged')}` "
        "(the rule below).",
        "- **Malleable policies**: " + "; ".join(
            f"`{p}`: {BY_KEY[p].what}" for p in summary["policies"]) + ".",
        "- **Metrics**: mean turnaround (submit to end), makespan (first submit to last end), "
        "mean wait, node utilization (busy node-seconds over nodes x makespan); changes are "
        "% of the baseline's value (utilization too: a relative change), means over seeds.",
        "",
        "### The rule that makes jobs malleable",
        "",
        *(RULE or "").strip().splitlines()[3:],
        "",
        "## Our best policy beside the paper's ranges",
        "",
        "The paper's ranges are the best strategy's change on each machine (Cori, Eagle, "
        "Theta); ours is the best policy's mean change at each fraction on this one log.",
        "",
        "| metric | paper (best strategy) | " + " | ".join(
            f"ours at {f}% (best policy)" for f in fractions if f != "0") + " | where |",
        "|---|---|" + "---|" * (len([f for f in fractions if f != "0"]) + 1),
    ]
    top = fractions[-1]
    for m in METRICS:
        low, high = summary["paper"][m]
        cells = []
        for f in fractions:
            if f == "0":
                continue
            b = summary["best"][f].get(m)
            cells.append(f"{_pct(b['change'])} ({b['policy']})" if b else "-")
        place = summary["best"][top].get(m, {}).get("place", "-")
        lines.append(f"| {LABELS[m]} | {low:+.0f}% to {high:+.0f}% | " + " | ".join(cells)
                     + f" | at {top}%: {place} |")
    lines += ["", *why(summary)]
    lines += ["", "## Every policy (change vs baseline, mean over seeds; min..max)", ""]
    for m in METRICS:
        lines += [f"### {LABELS[m]}", "", "| policy | " + " | ".join(
            f"{f}%" for f in fractions) + " |", "|---|" + "---|" * len(fractions)]
        for p in summary["policies"]:
            per = summary["results"][p]
            cells = [(f"{_pct(per[f][m]['change'])} ({per[f][m]['min']:+.0f}.."
                      f"{per[f][m]['max']:+.0f})") if f in per else "-" for f in fractions]
            lines.append(f"| {p} | " + " | ".join(cells) + " |")
        lines.append("")
    lines += ["Jobs completed (fewest over seeds) and resizes (mean): " + "; ".join(
        f"{p}: " + ", ".join(f"{f}%: {summary['results'][p][f]['completed']} done, "
                             f"{summary['results'][p][f]['grows']:.0f} grows, "
                             f"{summary['results'][p][f]['shrinks']:.0f} shrinks"
                             for f in fractions if f in summary["results"][p])
        for p in summary["policies"]) + ".", "",
              "## Figures", "",
              "- [elastic_changes.png](elastic_changes.png): the four changes against the "
              "malleable fraction, one line per policy (error bars: min..max over seeds), "
              "the paper's range shaded; "
              + ", ".join(f"[elastic_{m}.png](elastic_{m}.png)" for m in METRICS)
              + ": one metric each.", ""]
    path = out / "report.md"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path
