"""The six panels of the KOALA paper's Figs. 7 (PRA) and 8 (PWA), drawn from our runs.

Panels (a)-(d) pool the jobs of every seed of a curve (all jobs, rigid ones
included, as the paper's CDFs); (c) and (d) add the no-malleability baseline of
the same workloads in grey. Panels (e) and (f) show the first seed of each curve:
the platform's utilization (mean over 10-minute bins) and the manager's grow and
shrink operations so far.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from malleable.experiments.koala.runs import (
    BASELINE,
    FIG7,
    FIG8,
    WORKLOAD_LABELS,
    Combo,
    JobRow,
    Results,
)
from malleable.metrics import plots
from malleable.metrics.plots import Style

COLORS = {"fpsma": "tab:blue", "egs": "tab:orange", "none": "0.45"}
DASHES = {"wm": "-", "wm-prime": "-", "wmr": "--", "wmr-prime": "--"}
#: Panel (f)'s shrink curves: dash-dot patterns, one per workload, none shared with grows.
SHRINK_DASHES = {"wm": ":", "wm-prime": ":", "wmr": "-.", "wmr-prime": "-."}
#: One symbol per policy (the baseline has none), so that curves differ in shape, not
#: only in colour: a grayscale print tells every legend entry apart.
MARKERS: dict[str, str | None] = {"fpsma": "o", "egs": "^", "none": None}
BIN_S = 600.0

PANELS = (
    ("a", "average size (CDF)", "processors per job, averaged over its execution"),
    ("b", "maximum size (CDF)", "maximum processors reached per job"),
    ("c", "execution time (CDF)", "execution time (s)"),
    ("d", "response time (CDF)", "response time (s)"),
    ("e", "utilization", "time (h)"),
    ("f", "manager activity", "time (h)"),
)


def style(combo: Combo) -> Style:
    """Colour and marker by policy, dashes by workload; FPSMA wider and pale under a thin
    EGS line, so that both stay visible where they coincide. Within a panel no two
    curves share a (dashes, marker) pair."""
    if combo.approach == "none":
        return Style(COLORS["none"], DASHES[combo.workload], 1.2, 0.9, MARKERS["none"])
    if combo.policy == "fpsma":
        return Style(COLORS["fpsma"], DASHES[combo.workload], 3.0, 0.55, MARKERS["fpsma"])
    return Style(COLORS[combo.policy], DASHES[combo.workload], 1.6, 1.0,
                 MARKERS[combo.policy])


def shrink_style(combo: Combo) -> Style:
    """Panel (f)'s shrink curve of ``combo``: its grows' colour and marker, shrink dashes."""
    base = style(combo)
    return Style(base.color, SHRINK_DASHES[combo.workload], base.linewidth, base.alpha,
                 base.marker)


def _jobs(results: Results, combo: Combo, variant: str) -> list[JobRow]:
    return [j for run in results.of(combo, variant) for j in run.jobs]


def _cdf_panel(ax: Any, results: Results, combos: Sequence[Combo], variant: str,
               value: Callable[[JobRow], float], with_baseline: bool) -> None:
    for combo in combos:
        plots.cdf(ax, [value(j) for j in _jobs(results, combo, variant)], combo.label,
                  style(combo))
    if with_baseline:
        workloads = {c.workload for c in combos}
        for base in BASELINE:
            if base.workload in workloads:
                plots.cdf(ax, [value(j) for j in _jobs(results, base, variant)],
                          f"no malleability · {WORKLOAD_LABELS[base.workload]}", style(base))


def _utilization_panel(ax: Any, results: Results, combos: Sequence[Combo], variant: str) -> None:
    for combo in combos:
        runs = results.of(combo, variant)
        if not runs:
            continue
        x, y = plots.binned_mean(runs[0].utilization, BIN_S)
        plots.series(ax, x / 3600, y * 100, combo.label, style(combo), step=False)
    ax.set_ylabel("busy nodes (% of 272), 10-min mean")
    # headroom above 100% for the legend, which would otherwise cover curves that fill the
    # panel
    ax.set_ylim(0, 140)
    ax.set_yticks(range(0, 101, 20))


def _activity_panel(ax: Any, results: Results, combos: Sequence[Combo], variant: str) -> None:
    for combo in combos:
        runs = results.of(combo, variant)
        if not runs:
            continue
        x, y = plots.cumulative(runs[0].grows)
        plots.series(ax, x / 3600, y, f"{combo.label} grows", style(combo), step=True)
        if runs[0].shrinks:
            x, y = plots.cumulative(runs[0].shrinks)
            plots.series(ax, x / 3600, y, f"{combo.label} shrinks", shrink_style(combo),
                         step=True)
    ax.set_ylabel("operations so far")


def draw_panel(ax: Any, panel: str, results: Results, combos: Sequence[Combo],
               variant: str) -> None:
    letter, title, xlabel = next(p for p in PANELS if p[0] == panel)
    if panel == "a":
        _cdf_panel(ax, results, combos, variant, lambda j: j.avg_size, False)
    elif panel == "b":
        _cdf_panel(ax, results, combos, variant, lambda j: float(j.max_size), False)
    elif panel == "c":
        _cdf_panel(ax, results, combos, variant, lambda j: j.execution, True)
    elif panel == "d":
        _cdf_panel(ax, results, combos, variant, lambda j: j.response, True)
    elif panel == "e":
        _utilization_panel(ax, results, combos, variant)
    else:
        _activity_panel(ax, results, combos, variant)
    n = len(results.seeds)
    seeds = (f"seed {results.seeds[0]}" if panel in ("e", "f")
             else f"{n} seed{'s' if n != 1 else ''}{' pooled' if n > 1 else ''}")
    plots.finish(ax, f"({letter}) {title} — {seeds}", xlabel, handlelength=4.0)


def draw_figure(results: Results, figure: str, out: Path, variant: str = "paper"
                ) -> list[Path]:
    """Fig. 7 or 8: one PNG with the six panels, and one PNG per panel."""
    combos = FIG7 if figure == "7" else FIG8
    name = "PRA (no shrinking)" if figure == "7" else "PWA (growing and shrinking)"
    suffix = "" if variant == "paper" else f"-{variant}"
    title = f"Fig. {figure}: FPSMA vs EGS under {name} — our simulation"
    if variant != "paper":
        title += f" — variant: {variant} (one change to the paper's setting)"
    written: list[Path] = []
    fig, axes = plots.grid(2, 3)
    for ax, (letter, _, _) in zip(axes, PANELS, strict=True):
        draw_panel(ax, letter, results, combos, variant)
    written.append(plots.save(fig, out / f"fig{figure}{suffix}.png", title))
    if variant == "paper":
        for letter, _, _ in PANELS:
            fig, ax = plots.single()
            draw_panel(ax, letter, results, combos, variant)
            written.append(plots.save(fig, out / f"fig{figure}{letter}.png"))
    return written
