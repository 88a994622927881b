"""KOALA Figs. 7/8: every curve of every panel can be told from its legend alone, also in
grayscale (a distinct (dashes, marker) pair per legend entry, not only a colour)."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
from itertools import pairwise

import matplotlib.pyplot as plt
import pytest

from malleable.experiments.koala.plots import PANELS, draw_panel
from malleable.experiments.koala.runs import BASELINE, FIG7, FIG8, JobRow, Results, Run


def _results() -> Results:
    results = Results((1,))
    for i, combo in enumerate((*FIG7, *FIG8, *BASELINE)):
        jobs = [JobRow("gadget2", True, 2.0 + i + k, 4 + k, 100.0 * (k + 1), 150.0 * (k + 1),
                       10.0, False) for k in range(5)]
        results.add(Run(combo, "paper", 1, jobs, {},
                        grows=[60.0 * k for k in range(1, 30)],
                        shrinks=[90.0 * k for k in range(1, 8)] if combo.approach == "pwa"
                        else [],
                        utilization=[(0.0, 0.5), (3600.0, 0.8), (7200.0, 0.2)]))
    return results


@pytest.mark.parametrize("figure", ["7", "8"])
@pytest.mark.parametrize("panel", [p[0] for p in PANELS])
def test_legend_entries_have_distinct_dashes_and_markers(figure: str, panel: str) -> None:
    fig, ax = plt.subplots()
    try:
        draw_panel(ax, panel, _results(), FIG7 if figure == "7" else FIG8, "paper")
        handles = ax.get_legend().legend_handles
        labels = [t.get_text() for t in ax.get_legend().get_texts()]
        keys = [(h.get_linestyle(), h.get_marker()) for h in handles]
        assert len(labels) >= 4
        assert len(set(keys)) == len(keys), dict(zip(labels, keys, strict=True))
    finally:
        plt.close(fig)


def test_panel_f_of_fig_8_has_grows_and_shrinks_of_both_workloads() -> None:
    fig, ax = plt.subplots()
    try:
        draw_panel(ax, "f", _results(), FIG8, "paper")
        labels = [t.get_text() for t in ax.get_legend().get_texts()]
        assert len(labels) == 8
        assert "FPSMA · W'm grows" in labels and "FPSMA · W'mr shrinks" in labels
    finally:
        plt.close(fig)


def test_every_figure_is_a_step_of_the_progress_bar() -> None:
    from malleable.experiments.koala.experiment import drawing_steps

    assert drawing_steps(["paper"]) == [("7", "paper"), ("8", "paper")]
    assert len(drawing_steps(["paper", "local-25", "reconfig-30"])) == 6


@pytest.mark.parametrize("figure", ["7", "8"])
def test_utilization_legend_covers_no_curve(figure: str) -> None:
    """Panel (e): curves that swing over the whole 0-100% range leave room for the legend
    above them (it used to sit on a curve)."""
    results = Results((1,))
    for i, combo in enumerate((*FIG7, *FIG8, *BASELINE)):
        swing = [(600.0 * k, (0.05 if k % 2 else 1.0) - 0.01 * i) for k in range(40)]
        results.add(Run(combo, "paper", 1, [], {}, grows=[], shrinks=[], utilization=swing))
    fig, ax = plt.subplots(figsize=(5.2, 3.8))
    try:
        draw_panel(ax, "e", results, FIG7 if figure == "7" else FIG8, "paper")
        fig.tight_layout()
        fig.canvas.draw()
        box = ax.get_legend().get_window_extent(fig.canvas.get_renderer())  # type: ignore[attr-defined]
        for line in ax.get_lines():
            points = line.get_transform().transform(line.get_xydata())
            for (x0, y0), (x1, y1) in pairwise(points):
                for t in (i / 20 for i in range(21)):
                    assert not box.contains(x0 + t * (x1 - x0), y0 + t * (y1 - y0)), line
        assert [t for t in ax.get_yticks() if t <= 100] == [0, 20, 40, 60, 80, 100]
    finally:
        plt.close(fig)
