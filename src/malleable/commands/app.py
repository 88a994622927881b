"""``malleable app demo``: run a malleable MPI example on a site with a resize schedule."""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any

from malleable.config import SiteConfig, load_config
from malleable.errors import ExternalError, InputError
from malleable.runner.demo import EXAMPLES, DemoRun, example_source, parse_schedule, run_schedule
from malleable.runner.launch import Launch


def register(sub: Any) -> None:
    p = sub.add_parser("app", help="run malleable MPI applications on a site",
                       description="Malleable MPI applications (malleable.mpi) on Slurm sites.")
    verbs = p.add_subparsers(dest="verb", metavar="VERB")
    verbs.required = True
    d = verbs.add_parser(
        "demo", help="run an example with a scripted resize schedule",
        description="Run an example program (examples/NAME.py) as a Slurm job on SITE, resize "
                    "it at equal phases to the node counts of --schedule (grow: allocation "
                    "first, then the processes; shrink: processes first, then the allocation), "
                    "and print per phase the process count, the nodes Slurm shows and the "
                    "time, then the checksum of the result. --fixed N also runs it at N nodes "
                    "without resizes and compares the checksums.")
    d.add_argument("example", choices=EXAMPLES, help="which example program")
    d.add_argument("--config", type=Path, required=True, metavar="FILE",
                   help="clusters config (TOML, e.g. from `malleable testbed config`)")
    d.add_argument("--site", required=True, help="site name in the config")
    d.add_argument("--schedule", default="2,4,2", help="node counts per phase (default 2,4,2)")
    d.add_argument("--fixed", type=int, metavar="N", help="also run at N nodes and compare")
    d.add_argument("--iterations", type=int, default=60, help="iterations (default 60)")
    d.add_argument("--size", type=int, help="problem size (default: the example's)")
    d.add_argument("--delay", type=float, default=0.2, metavar="S",
                   help="seconds of sleep per iteration, to watch it (default 0.2)")
    d.add_argument("--program", type=Path, metavar="FILE",
                   help="run this program instead of the example (same options)")
    d.add_argument("--iface", default="eth0",
                   help="network interface MPI uses on the nodes (default eth0)")
    d.add_argument("--timeout", type=float, default=600.0, metavar="S",
                   help="give up (and cancel the job) after S seconds without progress")
    d.add_argument("--json", action="store_true", help="print the outcome as one JSON object")
    d.set_defaults(func=run_demo)


def _check(args: argparse.Namespace) -> list[int]:
    schedule = parse_schedule(args.schedule)
    if args.iterations < len(schedule):
        raise InputError(f"--iterations {args.iterations} cannot hold {len(schedule)} phases")
    if args.fixed is not None and args.fixed < 1:
        raise InputError("--fixed needs a node count >= 1")
    for flag in ("delay", "timeout"):
        value = getattr(args, flag)
        if not (value >= 0 and math.isfinite(value)):
            raise InputError(f"--{flag} must be a non-negative number of seconds")
    if args.size is not None and args.size < 1:
        raise InputError("--size must be at least 1")
    return schedule


def _launch(args: argparse.Namespace, largest: int) -> Launch:
    if args.program is not None:
        try:
            name, text = args.program.name, args.program.read_text()
        except OSError as exc:
            raise InputError(f"cannot read program: {exc.strerror}",
                             source=str(args.program)) from None
    else:
        name, text = example_source(args.example)
    options = ["--iterations", str(args.iterations), "--delay", str(args.delay),
               "--max", str(largest)]
    if args.size is not None:
        options += ["--size", str(args.size)]
    return Launch(name, text, tuple(options), interface=args.iface or None)


def run_demo(args: argparse.Namespace) -> int:
    schedule = _check(args)
    site = load_config(args.config).site(args.site)
    largest = max([*schedule, args.fixed or 1])
    if site.nodes is not None and largest > site.nodes:
        raise InputError(f"site {site.name} has {site.nodes} nodes; the schedule needs {largest}")
    launch = _launch(args, largest)
    runs = {"malleable": _run(site, launch, schedule, args)}
    if args.fixed is not None:
        runs["fixed"] = _run(site, launch, [args.fixed], args)
    _report(args, schedule, runs)
    bad = [name for name, run in runs.items() if run.exit_code != 0]
    if bad:
        raise ExternalError(f"{', '.join(bad)} run(s) failed: exit codes "
                            f"{[runs[b].exit_code for b in bad]}")
    return 0


def _run(site: SiteConfig, launch: Launch, schedule: list[int],
         args: argparse.Namespace) -> DemoRun:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from malleable.kinds import commands
    from malleable.runner.job import MpiJob
    from malleable.runner.nodes import NodeShell

    ctl = commands(site, as_kind="slurm")  # Slurm's commands, over the site's transport
    job = MpiJob(ctl, NodeShell(ctl.runner, site.command_timeout), launch)
    label = f"{args.example} {','.join(map(str, schedule))}"
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
               TimeElapsedColumn())
    try:
        with Progress(*columns, transient=True, disable=args.json) as bar:
            task = bar.add_task(label, total=args.iterations)
            return run_schedule(job, schedule, args.iterations, args.timeout,
                                lambda i: bar.update(task, completed=i))
    finally:
        ctl.runner.close()


def _report(args: argparse.Namespace, schedule: list[int], runs: dict[str, DemoRun]) -> None:
    if args.json:
        print(json.dumps({name: _jsonable(run) for name, run in runs.items()}))
        return
    from rich.console import Console
    from rich.table import Table

    console = Console()
    for name, run in runs.items():
        table = Table(title=f"{args.example} on {args.site}: {name} run (Slurm job "
                            f"{run.slurm_id})")
        for col in ("phase", "processes", "Slurm nodes", "iterations", "seconds",
                    "reconfiguration s"):
            table.add_column(col, justify="right")
        nodes = [schedule[0] if name == "malleable" else args.fixed,
                 *[s.slurm_nodes for s in run.steps]]
        for k, phase in enumerate(run.phases):
            shown = nodes[k] if k < len(nodes) else None
            table.add_row(str(k + 1), str(phase["size"]),
                          "job ended" if shown is None else str(shown),
                          f"{phase['iteration']}-{phase['end_iteration']}",
                          f"{phase['seconds']:.2f}", f"{phase['reconfig_seconds']:.2f}")
        console.print(table)
        console.print(f"checksum: {run.checksum!r}  exit code: {run.exit_code}")
    if "fixed" in runs and runs["fixed"].checksum is not None:
        a, b = runs["malleable"].checksum, runs["fixed"].checksum
        same = a is not None and math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)
        console.print(f"malleable vs fixed: {'same' if same else 'DIFFERENT'} checksum")


def _jsonable(run: DemoRun) -> dict[str, Any]:
    return {"slurm_id": run.slurm_id, "exit_code": run.exit_code, "checksum": run.checksum,
            "phases": run.phases,
            "steps": [{"target": s.target, "before": s.change.before, "after": s.change.after,
                       "slurm_nodes": s.slurm_nodes, "iteration": s.iteration,
                       "seconds": s.change.seconds, "error": s.change.error}
                      for s in run.steps]}
