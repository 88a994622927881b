"""KOALA Figs. 7/8: every curve of every panel can be told from its legend alone, also in
grayscale (a distinct (dashes, marker) pair per legend entry, not only a colour)."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
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
