"""``malleable simulate``: run a workload through any policy on a simulated platform."""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from malleable import argtypes
from malleable.commands.common import (
    add_policy_arguments,
    load_numpy,
    policy_from_args,
    print_summary,
)
from malleable.errors import InputError
from malleable.workloads.koala import KOALA_WORKLOADS

if TYPE_CHECKING:
    from malleable.model import JobSpec
    from malleable.sim.run import SimConfig
    from malleable.workloads.swf import SwfTrace
    from malleable.workloads.swf_plain import JobTable


def register(sub: Any) -> None:
    p = sub.add_parser(
        "simulate", help="run a workload through a policy on simulated clusters",
        description="Simulate a workload with the manager and any registered policy (KOALA's "
                    "by default) on the five DAS-3 clusters or another --platform; write "
                    "per-job records (CSV) and a summary (JSON) to --out and print a summary "
                    "table.",
    )
    add_policy_arguments(p)
    p.add_argument("--platform", default=None, metavar="das3|N|CONFIG",
                   help="the simulated clusters: das3, N (one cluster of N nodes) or a clusters "
                        "config (each site's nodes, reserve and speed); default: the machine an "
                        "SWF file's header describes (MaxNodes, MaxProcs), else das3")
    p.add_argument("--procs-per-node", type=argtypes.positive, default=None, metavar="K",
                   help="processors of an SWF file's node: job sizes are divided by K, rounded "
                        "up (default: MaxProcs/MaxNodes of its header without --platform, 1 "
                        "with it)")
    p.add_argument("--workload", default="wm", metavar="{" + ",".join(KOALA_WORKLOADS) + ",PATH}",
                   help="a KOALA workload name or a malleable SWF file (docs/workloads.md)")
    p.add_argument("--seed", type=argtypes.seed, default=1, help="seed of the generated workload")
    p.add_argument("--out", type=Path, help="directory for jobs.csv and summary.json")
    p.add_argument("--json", action="store_true", help="print the summary as one JSON object")
    p.add_argument("--reconfig-cost", type=float, default=0.0, metavar="S",
                   help="seconds without progress at each resize (default 0)")
    p.add_argument("--release-delay", type=float, default=0.0, metavar="S",
                   help="seconds before shrunk nodes are released (default 0)")
    p.add_argument("--background", type=float, default=0.0, metavar="S",
                   help="mean inter-arrival of local users' jobs per cluster, 0 for none")
    p.add_argument("--model-option", action="append", default=[], metavar="KEY=VALUE",
                   dest="model_options",
                   help="a mechanism of the KOALA paper the plain model leaves out (repeatable; "
                        "info_period, grow_latency, grow_hold, adapt_period, ft_optimum, "
                        "gadget2_optimum; see docs/simulate.md)")
    p.set_defaults(func=run)


def _config(args: argparse.Namespace) -> SimConfig:
    from malleable.policies.registry import parse_options
    from malleable.sim.background import BackgroundSpec
    from malleable.sim.model_options import model_options
    from malleable.sim.run import SimConfig

    for flag in ("reconfig_cost", "release_delay", "background"):
        value = getattr(args, flag)
        if value < 0 or not math.isfinite(value):
            raise InputError(f"--{flag.replace('_', '-')} must be a non-negative number")
    background = BackgroundSpec(interarrival=args.background) if args.background > 0 else None
    try:
        options = parse_options(args.model_options)
    except InputError as exc:
        raise InputError(str(exc).replace("--policy-option", "--model-option")) from None
    model = model_options(options) if options else None
    return SimConfig(reconfig_cost=args.reconfig_cost, release_delay=args.release_delay,
                     background=background, seed=args.seed, timeline=False, model=model)


def run(args: argparse.Namespace) -> int:
    if args.workload not in KOALA_WORKLOADS:  # a file: its reader imports numpy
        load_numpy()
    from malleable.metrics.summary import jsonable
    from malleable.service import platform, stream_simulation, write_summary_json
    from malleable.sim.run import collector_eased
    from malleable.workloads.load import simulation_input

    policy = policy_from_args(args)
    config = _config(args)
    with collector_eased(paused=True):  # a million JobSpecs and no cycle: no pass needed
        jobs, read = simulation_input(args.workload, args.seed)
    spec, trace = args.platform, None
    if read is not None:  # an SWF file: the rules for real logs (docs/workloads.md)
        jobs, spec, trace = _as_log(read, args)
    elif args.procs_per_node is not None:
        raise InputError("--procs-per-node applies to an SWF file's --workload only")
    clusters = platform(spec or "das3")
    if len(jobs) >= PURE_NOTE_JOBS and _pure():
        print(PURE_NOTE, file=sys.stderr)
    # Each job's record is written and dropped once it has ended (the memory of the live
    # jobs only: a million-job trace); the summary comes from running totals.
    summary = stream_simulation(jobs, clusters, policy, config, args.out)
    summary.update(workload=args.workload, seed=args.seed)
    if (spec or "das3") != "das3":
        summary["platform"] = spec
    if trace is not None:
        summary["trace"] = trace
    if args.out is not None:
        write_summary_json(args.out, summary)
    if args.json:
        print(json.dumps(jsonable(summary)))
    else:
        print_summary(summary)
        if trace is not None:
            print("trace: " + ", ".join(f"{key} {value:g}" for key, value in trace.items()))
    return 0


#: A run of at least this many jobs on the pure-Python build says how to get the compiled one.
PURE_NOTE_JOBS = 50_000
PURE_NOTE = ("malleable: this is the pure-Python build; the compiled one runs simulations "
             "2.2-3.7x faster: `pip install .` (not -e) with a C compiler and the Python "
             "headers (docs/simulate.md, \"Compiled build\")")


def _pure() -> bool:
    """Whether the simulator's hot path runs as plain Python (not the compiled build)."""
    import malleable.manager

    return str(malleable.manager.__file__).endswith(".py")


def _as_log(read: SwfTrace, args: argparse.Namespace
            ) -> tuple[list[JobSpec] | JobTable, str | None, dict[str, int | float]]:
    """An SWF file's jobs under the rules for real logs, the platform (``--platform``, or
    the header's node count as ``N``; None: das3) and the summary's ``trace`` counts."""
    from malleable.workloads.swf_log import LogHeader, as_log

    log = LogHeader.of(read.header)
    spec: str | None = args.platform
    per_node: int | None = args.procs_per_node
    if spec is None and log.nodes is not None:
        spec = str(log.nodes)
        per_node = per_node if per_node is not None else log.per_node() or 1
    jobs, trace = as_log(read.jobs, log, per_node if per_node is not None else 1, read.counts)
    trace["skipped"] = read.skipped
    if args.platform is None and log.nodes is not None:
        trace["platform_from_header"] = log.nodes
    return jobs, spec, trace
