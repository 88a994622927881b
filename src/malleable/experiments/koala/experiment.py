"""``malleable experiment koala``: the KOALA paper's Figs. 7 and 8, and its findings.

Runs FPSMA and EGS under PRA on Wm and Wmr (Fig. 7) and under PWA on W'm and
W'mr (Fig. 8), plus the ``none`` baseline of each workload, for every seed (the
paper made 4 runs); then sensitivity runs (local users' load, a reconfiguration
cost, a release delay) unless ``--no-sensitivity``. Writes to ``--out``: the
six panels of each figure as PNG, report.md (the paper's findings beside ours,
point by point) and summary.json; ``--json`` prints the key numbers.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from malleable.errors import InputError
from malleable.experiments import executor as executors
from malleable.experiments.koala import real_load, sweep
from malleable.experiments.koala import stats as st
from malleable.experiments.koala.findings import FINDINGS, evaluate
from malleable.experiments.koala.options import add_arguments as add_arguments
from malleable.experiments.koala.report import write_report
from malleable.experiments.koala.runs import (
    COMBOS,
    PAPER,
    VARIANTS,
    Results,
    Task,
    Variant,
    plan,
    run_all,
)
from malleable.experiments.koala.sweep import SWEEP
from malleable.workloads.reallog import RealLog

logger = logging.getLogger(__name__)


def run(args: argparse.Namespace) -> int:
    if args.reps is None:
        args.reps = 2 if args.quick else 4
    if args.reps < 1:
        raise InputError(f"--reps must be at least 1, not {args.reps}")
    if args.workers < 1:
        raise InputError(f"--workers {args.workers}: give at least 1")
    real: list[Variant] = []
    log = None
    if args.background_trace is not None:  # read before --out is made: a bad log leaves none
        windows = real_load.parse_windows(args.background_window)
        real, log = real_load.variants(args.background_trace, windows)
    out: Path = args.out
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"cannot create the output directory: {exc.strerror}",
                         source=str(out)) from None
    seeds = tuple(range(args.seed, args.seed + args.reps))
    variants = VARIANTS if args.variants and not args.quick else (PAPER,)
    swept = SWEEP if args.sensitivity else ()
    results, summary = _run_and_draw(plan(seeds, variants) + plan(seeds, real)
                                     + plan(seeds, swept), seeds,
                                     [v.name for v in (*variants, *real)], out,
                                     quiet=args.json, executor=executors.from_args(args),
                                     sensitivity=bool(swept), real=(real, log))
    if args.json:
        print(json.dumps(summary))
    else:
        _print_verdicts(results, out)
    return 0


def drawing_steps(variants: list[str]) -> list[tuple[str, str]]:
    """The (figure, variant) pairs drawn after the simulations, in order."""
    return [(figure, variant) for figure in ("7", "8") for variant in variants]


def _run_and_draw(tasks: list[Task], seeds: tuple[int, ...], variants: list[str], out: Path,
                  quiet: bool, executor: executors.Executor | None = None,
                  sensitivity: bool = False,
                  real: tuple[list[Variant], RealLog | None] = ([], None)
                  ) -> tuple[Results, dict[str, Any]]:
    """Simulate, then draw the figures and write the report and summary.json, under one
    progress bar: each simulation, each figure and the report is a step, so the bar reaches
    its end only when every file is written. The results and summary.json's content."""
    console = Console(stderr=True)
    columns = (TextColumn("[progress.description]{task.description}"), BarColumn(),
               MofNCompleteColumn(), TimeElapsedColumn())
    drawings = drawing_steps(variants)
    with Progress(*columns, console=console, transient=quiet,
                  disable=quiet or not console.is_terminal) as progress:
        bar = progress.add_task("simulating", total=len(tasks) + len(drawings) + 1)

        def advance(task: Task) -> None:
            combo, variant, seed = task
            progress.update(bar, advance=1,
                            description=f"{variant.name} {combo.key} seed {seed}")

        results = run_all(tasks, seeds, advance, executor=executor)
        from malleable.experiments.koala.plots import draw_figure  # matplotlib: only to draw

        for figure, variant in drawings:
            progress.update(bar, description=f"drawing Fig. {figure} ({variant})")
            draw_figure(results, figure, out, variant)
            progress.advance(bar)
        progress.update(bar, description="writing report.md and summary.json")
        write_report(results, out, real_load.section(results, *real))
        summary = key_numbers(results, out)
        if real[0]:
            summary["real_load"] = {
                v.name: {"description": v.description,
                         "background_utilization": _number(real_load.mean_of(
                             results, v.name, "background_utilization")),
                         "background_jobs": _number(real_load.mean_of(
                             results, v.name, "background_jobs"))} for v in real[0]}
        if sensitivity:
            summary["sensitivity"] = sweep.write(results, out)
        (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n",
                                          encoding="utf-8")
        progress.update(bar, advance=1, description="done")
    return results, summary


def _number(value: float) -> float | None:
    return None if math.isnan(value) else round(value, 6)


def key_numbers(results: Results, out: Path) -> dict[str, Any]:
    """Means over seeds per run and every finding's verdict (per variant)."""
    runs: dict[str, dict[str, Any]] = {}
    for variant in results.variants():
        for combo in COMBOS:
            group = results.of(combo, variant)
            if not group:
                continue
            entry = {name: _number(st.mean_over(group, metric))
                     for name, (metric, _, _) in st.METRICS.items()}
            runs[f"{variant}:{combo.key}"] = {"figure": combo.figure, **entry}
    findings: dict[str, Any] = {}
    for variant in results.variants():
        outcomes = evaluate(results, variant)
        findings[variant] = {
            f.key: {"claim": f.claim, "verdict": outcomes[f.key].verdict,
                    "values": {k: _number(v) for k, v in outcomes[f.key].values.items()}}
            for f in FINDINGS}
    return {"out": str(out), "seeds": list(results.seeds),
            "simulations": sum(len(v) for v in results.runs.values()),
            "variants": results.variants(), "runs": runs, "findings": findings}


def _print_verdicts(results: Results, out: Path) -> None:
    from rich.table import Table

    outcomes = evaluate(results, "paper")
    table = Table(title="The paper's findings in our simulation (paper setting)")
    table.add_column("#")
    table.add_column("finding")
    table.add_column("verdict")
    for f in FINDINGS:
        verdict = outcomes[f.key].verdict
        color = "green" if verdict == "holds" else "red" if verdict == "does not hold" else "yellow"
        table.add_row(f.key, f.claim, f"[{color}]{verdict}[/{color}]")
    console = Console()
    console.print(table)
    console.print(f"report: {out / 'report.md'}; figures: {out}/fig7*.png, {out}/fig8*.png")
