"""``malleable simulate``: run a workload through a policy on the simulated DAS-3."""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from malleable.errors import InputError
from malleable.metrics.summary import summarize, write_records
from malleable.model import DAS3, JobSpec
from malleable.policies.koala import Approach, KoalaPolicy
from malleable.policies.malleability import MALLEABILITY_POLICIES
from malleable.sim.background import BackgroundSpec
from malleable.sim.run import SimConfig, SimResult, simulate
from malleable.workloads.koala import KOALA_WORKLOADS, koala_workload
from malleable.workloads.swf import read_swf


def register(sub: Any) -> None:
    p = sub.add_parser(
        "simulate", help="run a workload through a KOALA policy on the simulated DAS-3",
        description="Simulate a workload on the five DAS-3 clusters with the manager and a "
                    "KOALA approach and malleability policy; write per-job records (CSV) and a "
                    "summary (JSON) to --out and print a summary table.",
    )
    p.add_argument("--approach", choices=[a.value for a in Approach], default="pra",
                   help="job management approach (default: pra)")
    p.add_argument("--policy", choices=list(MALLEABILITY_POLICIES), default="fpsma",
                   help="malleability policy (default: fpsma)")
    p.add_argument("--workload", default="wm", metavar="{" + ",".join(KOALA_WORKLOADS) + ",PATH}",
                   help="a KOALA workload name or a malleable SWF file (docs/workloads.md)")
    p.add_argument("--seed", type=int, default=1, help="seed of the generated workload")
    p.add_argument("--out", type=Path, help="directory for jobs.csv and summary.json")
    p.add_argument("--json", action="store_true", help="print the summary as one JSON object")
    p.add_argument("--reconfig-cost", type=float, default=0.0, metavar="S",
                   help="seconds without progress at each resize (default 0)")
    p.add_argument("--release-delay", type=float, default=0.0, metavar="S",
                   help="seconds before shrunk nodes are released (default 0)")
    p.add_argument("--background", type=float, default=0.0, metavar="S",
                   help="mean inter-arrival of local users' jobs per cluster, 0 for none")
    p.set_defaults(func=run)


def load_workload(name: str, seed: int) -> list[JobSpec]:
    """A KOALA workload by name, or the jobs of an SWF file."""
    if name in KOALA_WORKLOADS:
        return koala_workload(name, seed)
    path = Path(name)
    if not path.exists():
        valid = ", ".join(KOALA_WORKLOADS)
        raise InputError(f"workload {name!r} is neither a file nor one of {valid}")
    return read_swf(path).jobs


def _config(args: argparse.Namespace) -> SimConfig:
    for flag in ("reconfig_cost", "release_delay", "background"):
        value = getattr(args, flag)
        if value < 0 or not math.isfinite(value):
            raise InputError(f"--{flag.replace('_', '-')} must be a non-negative number")
    background = BackgroundSpec(interarrival=args.background) if args.background > 0 else None
    return SimConfig(reconfig_cost=args.reconfig_cost, release_delay=args.release_delay,
                     background=background, seed=args.seed)


def run(args: argparse.Namespace) -> int:
    jobs = load_workload(args.workload, args.seed)
    policy = KoalaPolicy.named(args.approach, args.policy)
    result = simulate(jobs, DAS3, policy, _config(args))
    summary = summarize(result.records, result.operations, result.makespan, result.utilization)
    summary.update(approach=args.approach, policy=args.policy, workload=args.workload,
                   seed=args.seed)
    if args.out is not None:
        write_outputs(args.out, result, summary)
    if args.json:
        print(json.dumps(_jsonable(summary)))
    else:
        print_summary(summary)
    return 0


def write_outputs(out: Path, result: SimResult, summary: dict[str, Any]) -> None:
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"cannot create output directory: {exc.strerror}",
                         source=str(out)) from None
    write_records(out / "jobs.csv", result.records)
    (out / "summary.json").write_text(json.dumps(_jsonable(summary), indent=2) + "\n")


def _jsonable(summary: dict[str, Any]) -> dict[str, Any]:
    return {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in summary.items()}


def print_summary(summary: dict[str, Any]) -> None:
    table = Table(title=f"{summary['workload']} · {summary['approach']} · {summary['policy']}")
    table.add_column("metric")
    table.add_column("value", justify="right")
    for key, value in summary.items():
        if key in ("workload", "approach", "policy"):
            continue
        table.add_row(key, f"{value:,.2f}" if isinstance(value, float) else str(value))
    Console().print(table)
