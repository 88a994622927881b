"""DMRlib figures as a reader sees them: Fig. 3's axis in numeric order, legends that cover
no bar, Fig. 8a's speedup markers inside the frame, the submission mode of Figs. 8-10, and
one quantity per panel of Fig. 5."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import pytest
from matplotlib.patches import Rectangle

from malleable.cli import main
from malleable.experiments.dmrlib import plots


@pytest.fixture(scope="module")
def figures(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The figures of a quick study, kept open (name of the PNG -> Figure)."""
    kept: dict[str, Any] = {}
    original = plots._save

    def keep(fig: Any, path: Path, rect: Any = None) -> Path:
        fig.tight_layout(rect=rect)
        fig.canvas.draw()
        kept[path.name] = fig
        return path

    plots._save = keep  # type: ignore[assignment]
    try:
        out = tmp_path_factory.mktemp("dmrlib")
        assert main(["experiment", "dmrlib", "--quick", "--out", str(out), "--json"]) == 0
    finally:
        plots._save = original  # type: ignore[assignment]
    yield kept
    for fig in kept.values():
        plt.close(fig)


def test_fig3_process_counts_in_numeric_order(figures: Any) -> None:
    ax = figures["fig3_gain_difference.png"].axes[0]
    ticks = [int(t.get_text()) for t in ax.get_xticklabels()]
    assert ticks == sorted(ticks)
    assert ticks == [2, 4, 6, 8, 12, 16, 24, 32]


@pytest.mark.parametrize("name", ["fig8_workload_time.png", "fig9_allocation.png",
                                  "fig10_energy.png"])
def test_legend_covers_no_bar_and_names_the_submission_mode(figures: Any, name: str) -> None:
    fig = figures[name]
    legends = fig.legends + [ax.get_legend() for ax in fig.axes if ax.get_legend()]
    assert legends
    texts = [t.get_text() for legend in legends for t in legend.get_texts()]
    assert any("(rigid submission)" in t for t in texts)
    assert any("(moldable submission)" in t for t in texts)
    renderer = fig.canvas.get_renderer()
    for legend in legends:
        box = legend.get_window_extent(renderer)
        for ax in fig.axes:
            for patch in ax.patches:
                if isinstance(patch, Rectangle) and patch.get_height() > 0:
                    assert not box.overlaps(patch.get_window_extent(renderer)), name


def test_fig8a_speedup_markers_inside_the_frame(figures: Any) -> None:
    twin = next(ax for ax in figures["fig8_workload_time.png"].axes
                if ax.get_ylabel() == "speedup")
    top = twin.get_ylim()[1]
    for line in twin.get_lines():
        assert max(line.get_ydata()) < 0.95 * top


def test_fig5_one_quantity_per_panel_and_no_fills(figures: Any) -> None:
    axes = figures["fig5_evolution.png"].axes
    assert [ax.get_ylabel().split("\n")[0] for ax in axes] == [
        "allocated nodes", "running jobs", "jobs completed"]
    assert not any(ax.collections for ax in axes)  # no fill_between
    assert not any(ax.get_legend() for ax in axes)  # one figure legend, below


def test_drawing_reports_each_figure_for_the_progress_bar(tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str],
                                                          monkeypatch: pytest.MonkeyPatch
                                                          ) -> None:
    """The second bar of `experiment dmrlib` counts the figures and the report: it is
    full only when every file is written. (Bars are drawn on a terminal only: the test's
    captured output is made to look like one.)"""
    from rich.console import Console

    monkeypatch.setattr(Console, "is_terminal", property(lambda self: True))
    assert main(["experiment", "dmrlib", "--quick", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "figures and report written" in out
    assert f"{len(plots.FIGURES) + 1}/{len(plots.FIGURES) + 1}" in out


def test_fig4_curves_differ_without_colour_and_the_legend_covers_none(figures: Any) -> None:
    """Fig. 4: each curve has its own (marker, dashes, fill), so grayscale print keeps them
    apart; speedups on a log axis around 1; the legend outside the axes; a point that
    cannot be drawn (no wait at all) is named under the plot, not silently left out."""
    fig = figures["fig4_speedups.png"]
    ax = fig.axes[0]
    lines = [line for line in ax.get_lines() if not line.get_label().startswith("_")]
    looks = [(line.get_marker(), line.get_linestyle(), line.get_markerfacecolor() == "none")
             for line in lines]
    assert len(lines) == 6 and len(set(looks)) == 6, looks
    assert ax.get_yscale() == "log"
    renderer = fig.canvas.get_renderer()
    legend = ax.get_legend()
    assert not legend.get_window_extent(renderer).overlaps(ax.get_window_extent(renderer))
    undrawn = [(line.get_label(), str(size)) for line in lines
               for size, y in zip(line.get_xdata(), line.get_ydata(), strict=True)
               if y != y]  # NaN: not drawn
    note = " ".join(t.get_text() for t in fig.texts)
    for label, size in undrawn:
        assert f"{label.split(' submission')[0]}) at {size} jobs" in note, (label, note)
