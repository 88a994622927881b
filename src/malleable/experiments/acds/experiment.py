"""``malleable experiment acds``: Figs. 4 to 8 of the AC-DS paper.

Runs AC-DS, AG-DS and EQUI-EQUI on random scheduler trees of K = 2..5 levels with
Downey jobs (256 processors), then the quantum-factor and reallocation-cost study at
K = 5; draws the five figures, writes report.md (paper vs ours) and summary.json.
"""

from __future__ import annotations

import argparse
import json
import logging
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from malleable.errors import InputError
from malleable.experiments import executor as executors
from malleable.experiments.acds.markdown import Regime, markdown, regime_label
from malleable.experiments.acds.options import add_arguments as add_arguments
from malleable.experiments.acds.plan import Results, Settings, chunks, run_all
from malleable.experiments.acds.report import key_numbers, verdicts
from malleable.metrics.summary import output_dir

logger = logging.getLogger(__name__)


def settings_from(args: argparse.Namespace) -> Settings:
    """The sweep that the command line asks for; InputError for bad values."""
    base = Settings.quick() if args.quick else Settings()
    reps = base.reps if args.reps is None else args.reps
    if reps < 1:
        raise InputError(f"--reps {reps}: give at least 1 repetition")
    if args.workers < 1:
        raise InputError(f"--workers {args.workers}: give at least 1")
    scale = base.params.work_scale if args.work_scale is None else args.work_scale
    if not scale > 0:
        raise InputError(f"--work-scale {args.work_scale}: give a positive number")
    low = base.params.min_parallelism if args.min_parallelism is None else args.min_parallelism
    top = base.params.max_parallelism
    if not 1 <= low <= top:
        raise InputError(f"--min-parallelism {args.min_parallelism}: give a number in "
                         f"[1, {top:g}]")
    jobs = base.jobs if args.jobs is None else _grid(args.jobs)
    fig8 = base.fig8_jobs if base.fig8_jobs in jobs or args.jobs is None else max(jobs)
    params = replace(base.params, work_scale=scale, min_parallelism=low)
    return replace(base, reps=reps, jobs=jobs, seed=args.seed, integral=args.integral,
                   params=params, fig8_jobs=fig8)


def _grid(text: str) -> tuple[int, ...]:
    try:
        first, last, step = (int(x) for x in text.split(":"))
    except ValueError:
        raise InputError(f"--job-counts {text!r}: write FIRST:LAST:STEP, e.g. 20:500:20") from None
    if not 1 <= first <= last or step < 1:
        raise InputError(f"--job-counts {text!r}: need 1 <= FIRST <= LAST and STEP >= 1")
    return tuple(range(first, last + 1, step))


def contention_settings(args: argparse.Namespace, settings: Settings) -> Settings | None:
    """The second sweep that ``--contention A`` asks for, or None."""
    if args.contention is None:
        return None
    top = settings.params.max_parallelism
    if not 1 < args.contention <= top:
        raise InputError(f"--contention {args.contention:g}: give a lowest parallelism in "
                         f"(1, {top:g}]")
    if args.contention == settings.params.min_parallelism:
        raise InputError(f"--contention {args.contention:g}: the main sweep already has it "
                         f"(--min-parallelism)")
    return replace(settings, params=replace(settings.params, min_parallelism=args.contention))


def run(args: argparse.Namespace) -> int:
    from malleable.experiments.acds.figures import FILES  # matplotlib: only when run

    settings = settings_from(args)
    extra = contention_settings(args, settings)
    sweeps = [settings] if extra is None else [settings, extra]
    out = output_dir(args.out)
    console = Console(stderr=True)
    start = time.monotonic()
    with Progress(TextColumn("[bold]{task.fields[stage]}"), BarColumn(), MofNCompleteColumn(),
                  TextColumn("{task.description}"), TimeElapsedColumn(), console=console,
                  transient=args.json,
                  disable=args.json or not console.is_terminal) as progress:
        total = sum(c.jobs for s in sweeps for c in chunks(s))
        sweep = progress.add_task("jobs simulated", total=total, stage="AC-DS sweep")
        writing = progress.add_task("", total=len(sweeps) * (len(FILES) + 1),
                                    stage="drawing figures")
        executor = executors.from_args(args)
        results = [run_all(s, lambda chunk: progress.advance(sweep, chunk.jobs),
                           executor=executor) for s in sweeps]
        payload = _write(results, sweeps, time.monotonic() - start, out,
                         lambda text: progress.update(writing, advance=1, description=text))
    if args.json:
        print(json.dumps(payload))
    else:
        _summary(console, payload, out)
    return 0


def _write(results: list[Results], sweeps: list[Settings], elapsed: float, out: Path,
           step: Callable[[str], None]) -> dict[str, Any]:
    """Draw the figures and write report.md and summary.json, calling ``step`` after each
    (the steps of the second bar, so that the bars are full only once every file is
    written); summary.json's content. A second sweep (``--contention``) has its figures
    in ``out/contention`` and its numbers under ``"contention"``."""
    from malleable.experiments.acds.figures import draw_all  # matplotlib: only to draw

    numbers = [key_numbers(r, s) for r, s in zip(results, sweeps, strict=True)]
    payload = _payload(numbers[0], sweeps[0], elapsed)
    draw_all(results[0], sweeps[0], out, lambda name: step(f"drew {name}"))
    others: list[Regime] = []
    if len(sweeps) > 1:
        sub = out / "contention"
        sub.mkdir(exist_ok=True)
        draw_all(results[1], sweeps[1], sub, lambda name: step(f"drew contention/{name}"))
        payload["contention"] = _payload(numbers[1], sweeps[1], elapsed)
        others.append((regime_label(sweeps[1]), sweeps[1], numbers[1]))
        step("contention figures drawn")
    (out / "report.md").write_text(markdown(numbers[0], sweeps[0], elapsed, others))
    (out / "summary.json").write_text(json.dumps(payload, indent=2) + "\n")
    step("figures and report written")
    return payload


def _payload(numbers: dict[str, Any], s: Settings, elapsed: float) -> dict[str, Any]:
    return {
        "experiment": "acds",
        "settings": {"levels": list(s.levels), "jobs": list(s.jobs), "reps": s.reps,
                     "quantum_factors": list(s.quantum_factors), "seed": s.seed,
                     "fig7_costs": list(s.fig7_costs), "fig8_costs": list(s.fig8_costs),
                     "fig8_jobs": s.fig8_jobs, "work_scale": s.params.work_scale,
                     "min_parallelism": s.params.min_parallelism,
                     "integral": s.integral},
        "elapsed_s": round(elapsed, 2),
        "figures": numbers,
        "findings": [{"figure": f, "finding": t, "paper": p, "ours": o, "verdict": v,
                      "holds": v == "holds"} for f, t, p, o, v in verdicts(numbers, s)],
    }


def _summary(console: Console, payload: dict[str, Any], out: Path) -> None:
    held = sum(1 for f in payload["findings"] if f["holds"])
    console.print(f"{held} of {len(payload['findings'])} findings of the paper hold here; "
                  f"figures, report.md and summary.json in {out} "
                  f"({payload['elapsed_s']:.1f} s)")
