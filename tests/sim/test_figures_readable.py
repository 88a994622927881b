"""The AC-DS and CooRM figures as a reader sees them (issue 19): every legend entry differs
in marker or dashes (so curves stay apart in grayscale print and where they coincide), no
legend covers a curve, every axis is labelled, and whole-number axes have whole ticks."""

from __future__ import annotations

from collections.abc import Iterator
from itertools import pairwise
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.legend import Legend
from matplotlib.lines import Line2D

from malleable.cli import main

RUNS = {
    "acds": ["--quick"],
    # several Fig. 7 delays, so that several curves share a panel
    "coorm": ["--quick", "--delays", "0,2,4,6,8,10", "--fig7-instances", "3"],
}


@pytest.fixture(scope="module")
def figures(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Figure]]:
    """Every figure the two experiments save (file name -> Figure, drawn)."""
    kept: dict[str, Figure] = {}
    original = Figure.savefig

    def keep(fig: Figure, path: Any, *args: Any, **kwargs: Any) -> None:
        original(fig, path, *args, **kwargs)
        kept[Path(path).name] = fig

    Figure.savefig = keep  # type: ignore[method-assign]
    try:
        for name, options in RUNS.items():
            out = tmp_path_factory.mktemp(name)
            assert main(["experiment", name, "--out", str(out), "--json", *options]) == 0
    finally:
        Figure.savefig = original  # type: ignore[method-assign]
    yield kept
    for fig in kept.values():
        plt.close(fig)


NAMES = ["fig4_scalability.png", "fig5_utilization.png", "fig6_makespan_ratio.png",
         "fig7_quantum_patterns.png", "fig8_reallocation_cost.png", "fig6.png", "fig7.png"]


def _legends(fig: Figure) -> list[Legend]:
    return [*fig.legends, *(ax.get_legend() for ax in fig.axes if ax.get_legend())]


def _look(handle: Any) -> tuple[str, str]:
    line = handle if isinstance(handle, Line2D) else handle[0]  # an errorbar's data line
    return str(line.get_marker()), str(line.get_linestyle())


def test_every_figure_was_drawn(figures: dict[str, Figure]) -> None:
    assert sorted(figures) == sorted(NAMES)


@pytest.mark.parametrize("name", NAMES)
def test_legend_entries_differ_without_colour(figures: dict[str, Figure], name: str) -> None:
    fig = figures[name]
    assert _legends(fig), name
    for ax in fig.axes:
        handles, labels = ax.get_legend_handles_labels()
        looks = [_look(h) for h in handles]
        assert len(set(looks)) == len(looks), (name, list(zip(labels, looks, strict=True)))


@pytest.mark.parametrize("name", NAMES)
def test_no_legend_covers_a_curve(figures: dict[str, Figure], name: str) -> None:
    fig = figures[name]
    canvas = FigureCanvasAgg(fig)  # the experiment closed the figure
    canvas.draw()
    renderer = canvas.get_renderer()
    for legend in _legends(fig):
        box = legend.get_window_extent(renderer)
        for ax in fig.axes:
            for line in ax.get_lines():
                points = line.get_transform().transform(line.get_xydata())
                for (x0, y0), (x1, y1) in pairwise(points):
                    for t in (i / 20 for i in range(21)):  # along each segment
                        x, y = x0 + t * (x1 - x0), y0 + t * (y1 - y0)
                        assert not box.contains(x, y), (name, line.get_label())


@pytest.mark.parametrize("name", NAMES)
def test_every_axis_is_labelled(figures: dict[str, Figure], name: str) -> None:
    for ax in figures[name].axes:
        assert ax.get_xlabel() and ax.get_ylabel(), name


def test_acds_fig8_quantum_factors_are_whole_ticks(figures: dict[str, Figure]) -> None:
    ax = figures["fig8_reallocation_cost.png"].axes[0]
    ticks = [t for t in ax.get_xticks() if ax.get_xlim()[0] <= t <= ax.get_xlim()[1]]
    assert ticks and all(float(t).is_integer() for t in ticks)


def test_coorm_fig7_says_which_delays_change_nothing(figures: dict[str, Figure]) -> None:
    """Curves of delays with no increase at all lie on the y axis, one on top of the other;
    their legend entries say so."""
    texts = [t.get_text() for legend in _legends(figures["fig7.png"])
             for t in legend.get_texts()]
    assert all(t.startswith("delay ") for t in texts)
    assert "Fig. 7" in figures["fig7.png"].axes[0].get_title()
