"""``malleable simulate``: run a workload through any policy on a simulated platform."""

from __future__ import annotations

import argparse
import json
import math
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
    from malleable.sim.run import SimConfig


def register(sub: Any) -> None:
    p = sub.add_parser(
        "simulate", help="run a workload through a policy on simulated clusters",
        description="Simulate a workload with the manager and any registered policy (KOALA's "
                    "by default) on the five DAS-3 clusters or another --platform; write "
                    "per-job records (CSV) and a summary (JSON) to --out and print a summary "
                    "table.",
    )
    add_policy_arguments(p)
    p.add_argument("--platform", default="das3", metavar="das3|N|CONFIG",
                   help="the simulated clusters: das3 (default), N (one cluster of N nodes) or "
                        "a clusters config (each site's nodes, reserve and speed)")
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
    p.add_argument("--background-trace", type=Path, metavar="LOG",
                   help="a real SWF log (.swf or .swf.gz) replayed on every cluster as local "
                        "users' load the manager does not control (docs/simulate.md)")
    p.add_argument("--background-window", default="seed", metavar="START|seed",
                   help="where the log's replay starts: seconds from its first submit, or "
                        "seed (default: a start on the hour drawn by --seed)")
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
    from malleable.workloads.load import simulation_workload

    policy = policy_from_args(args)
    clusters = platform(args.platform)
    config = _config(args)
    if args.background_trace is not None:  # a real log's users (docs/simulate.md)
        from dataclasses import replace

        from malleable.sim.background import background_replay

        config = replace(config, background_trace=background_replay(
            args.background_trace, args.background_window, args.seed))
    with collector_eased(paused=True):  # a million JobSpecs and no cycle: no pass needed
        jobs = simulation_workload(args.workload, args.seed)
    # Each job's record is written and dropped once it has ended (the memory of the live
    # jobs only: a million-job trace); the summary comes from running totals.
    summary = stream_simulation(jobs, clusters, policy, config, args.out)
    summary.update(workload=args.workload, seed=args.seed)
    if args.platform != "das3":
        summary["platform"] = args.platform
    if args.out is not None:
        write_summary_json(args.out, summary)
    if args.json:
        print(json.dumps(jsonable(summary)))
    else:
        print_summary(summary)
    return 0
