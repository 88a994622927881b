"""``malleable experiment dmrlib``: the DMRlib workload study (Iserte et al., section 5, App. B).

Runs the fixed, pure moldable, pure malleable and flexible workloads of each size
and the heterogeneous mixes of Table 7 on the simulated 128-node cluster, draws the
figures as PNG, writes Table 7 and a report beside the paper's findings, and with
``--json`` prints the key numbers. See docs/dmrlib.md.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import time
from collections.abc import Callable
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from malleable.errors import InputError
from malleable.experiments import executor as executors
from malleable.experiments.dmrlib.options import QUICK_SIZES, SIZES
from malleable.experiments.dmrlib.options import add_arguments as add_arguments
from malleable.experiments.dmrlib.results import VERSIONS, Study
from malleable.experiments.dmrlib.study import Setup, average
from malleable.experiments.dmrlib.study import run as run_one
from malleable.metrics.summary import output_dir, write_summary
from malleable.workloads.dmrlib import (
    ALL,
    NONE,
    TABLE7_MIXES,
    Draw,
    Mix,
    Submission,
    draw,
    from_trace,
)
from malleable.workloads.feitelson import FeitelsonModel
from malleable.workloads.swf import read_swf

logger = logging.getLogger(__name__)

def run(args: argparse.Namespace) -> int:
    from malleable.experiments.dmrlib.plots import FIGURES, draw_figures
    from malleable.experiments.dmrlib.report import key_numbers, write_table7
    from malleable.experiments.dmrlib.text import write_report

    sizes, table7_jobs = _sizes(args)
    out = output_dir(args.out)
    sources = _sources(args, sizes, table7_jobs)
    seeds = tuple(range(args.seed, args.seed + args.reps))
    source = "swf" if args.swf else "feitelson"
    first = "pooled" if args.reading == "pooled" else "literal"
    study = Study(sizes, table7_jobs, seeds, source, _options(args, first))
    other = (Study(sizes, table7_jobs, seeds, source, _options(args, "pooled"))
             if args.reading == "both" else None)
    setups = plan(sizes, table7_jobs)
    total = len(setups) + (sum(1 for *_, mix in setups if mix.name != NONE.name) if other else 0)
    with _progress(args.json) as progress:
        # figures and reports are steps of a second bar, shown from the start, so that
        # nothing runs after the bars are full
        simulating = progress.add_task("simulating", total=total * len(seeds))
        writing = progress.add_task("drawing figures", total=len(FIGURES) + 1, start=False)
        started = time.perf_counter()

        def bar(text: str, done: int) -> None:
            progress.update(simulating, advance=done, description=text)

        _execute(study, sources, args, bar)
        if other is not None:
            _execute(other, sources, args, bar, reuse=study)
        study.elapsed = time.perf_counter() - started
        progress.start_task(writing)
        draw_figures(study, out, lambda name: progress.update(
            writing, advance=1, description=f"drew {name}"))
        progress.update(writing, description="writing table7, report.md and summary.json")
        write_table7(study, out)
        write_report(study, out, other)
        numbers = key_numbers(study)
        if other is not None:
            other.elapsed = study.elapsed
            numbers["pooled"] = key_numbers(other)
        write_summary(out, numbers, legacy=True)
        progress.update(writing, advance=1, description="figures and report written")
    if args.json:
        print(json.dumps(numbers))
    else:
        Console().print(f"DMRlib study: {len(study.outcomes)} workloads in {study.elapsed:.1f} s; "
                        f"report in {out / 'report.md'}")
    return 0


def _sizes(args: argparse.Namespace) -> tuple[tuple[int, ...], int]:
    sizes = tuple(args.jobs) if args.jobs else (QUICK_SIZES if args.quick else SIZES)
    table7 = args.table7_jobs or (QUICK_SIZES[-1] if args.quick else 1000)
    for n in (*sizes, table7):
        if n < 1:
            raise InputError(f"workload sizes must be at least 1 job, not {n}")
    if args.reps < 1:
        raise InputError(f"--reps must be at least 1, not {args.reps}")
    for flag in ("interarrival", "factor"):
        value = getattr(args, flag)
        if not (value > 0 and math.isfinite(value)):
            raise InputError(f"--{flag} must be a positive number, not {value}")
    if not (args.reconfig_cost >= 0 and math.isfinite(args.reconfig_cost)):
        raise InputError(f"--reconfig-cost must be a non-negative number, not "
                         f"{args.reconfig_cost}")
    return tuple(sorted(set(sizes))), table7




def _sources(args: argparse.Namespace, sizes: tuple[int, ...],
             table7_jobs: int) -> dict[tuple[int, int], Draw]:
    """The drawn workloads, by (size, seed)."""
    model = FeitelsonModel(mean_interarrival=args.interarrival, factor=args.factor)
    trace = read_swf(args.swf) if args.swf else None
    if trace is not None and not trace.jobs:
        raise InputError("the trace has no job with a known size and run time",
                         source=str(args.swf))
    draws: dict[tuple[int, int], Draw] = {}
    for n in (*sizes, table7_jobs):
        for seed in range(args.seed, args.seed + args.reps):
            if trace is not None:
                draws[(n, seed)] = from_trace(trace, n, seed)
            else:
                draws[(n, seed)] = draw(n, seed, model)
    return draws


def _options(args: argparse.Namespace, reading: str) -> dict[str, Any]:
    return {"interarrival_s": args.interarrival, "factor": args.factor,
            "reconfig_cost_s": args.reconfig_cost, "multiples": not args.any_size,
            "reading": reading,
            "swf": str(args.swf) if args.swf else None, "quick": bool(args.quick)}


def plan(sizes: tuple[int, ...], table7_jobs: int) -> list[tuple[int, Submission, Mix]]:
    """Every (size, submission, mix) the study runs, without repeats."""
    setups: list[tuple[int, Submission, Mix]] = []
    for n in sizes:
        setups.extend((n, sub, mix) for sub, mix in VERSIONS.values())
    for sub in Submission:
        setups.extend((table7_jobs, sub, mix) for mix in TABLE7_MIXES)
    seen: set[tuple[int, Submission, str]] = set()
    unique = []
    for n, sub, mix in setups:
        if (n, sub, mix.name) not in seen:
            seen.add((n, sub, mix.name))
            unique.append((n, sub, mix))
    return unique


def _execute(study: Study, sources: dict[tuple[int, int], Draw],
             args: argparse.Namespace, step: Callable[[str, int], None],
             reuse: Study | None = None) -> None:
    """Run every simulation of the study; ``step(text, done)`` reports each (a bar).

    With ``reuse`` (the same study under the other reading), the workloads without
    malleable jobs are taken from it: the reading only acts on malleable jobs.
    """
    pooled = study.options["reading"] == "pooled"
    groups: list[tuple[int, Submission, Mix]] = []
    runs: list[tuple[Any, ...]] = []
    for n, sub, mix in plan(study.sizes, study.table7_jobs):
        if reuse is not None and mix.name == NONE.name:
            study.outcomes[(n, sub, mix.name)] = reuse.outcomes[(n, sub, mix.name)]
            continue
        groups.append((n, sub, mix))
        for seed in study.seeds:
            keep = n == study.table7_jobs and mix in (NONE, ALL) and seed == study.seeds[0]
            runs.append((Setup(n, sub, mix, seed), sources[(n, seed)], args.reconfig_cost,
                         keep, not args.any_size, pooled))

    def done(i: int) -> None:
        setup = runs[i][0]
        step(f"{setup.jobs} jobs · {setup.submission.value} · {setup.mix.name}", 1)

    outcomes = executors.from_args(args).map(run_one, runs, done)
    per = len(study.seeds)
    for g, (n, sub, mix) in enumerate(groups):
        study.outcomes[(n, sub, mix.name)] = average(outcomes[g * per:(g + 1) * per])
    step("simulated", 0)


def _progress(quiet_stdout: bool) -> Progress:
    console = Console(stderr=True) if quiet_stdout else Console()
    # drawn on a terminal only: a pipe, a file or CI gets no bars
    return Progress(TextColumn("{task.description:<36}"), BarColumn(), MofNCompleteColumn(),
                    TimeElapsedColumn(), console=console, transient=False,
                    disable=not console.is_terminal)

