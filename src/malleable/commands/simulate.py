"""``malleable simulate``: run a workload through any policy on a simulated platform."""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import sys
from collections.abc import Iterator, Sequence
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
    from malleable.model import Cluster, JobSpec
    from malleable.sim.run import RecordSink, SimConfig
    from malleable.workloads.swf import SwfTrace
    from malleable.workloads.swf_plain import JobTable

logger = logging.getLogger(__name__)

#: The policies that plan with a job's requested time (EASY's backfilling).
WALLTIME_POLICIES = ("easy", "easy-dmr")

#: Records between two updates of the progress bar (an update costs ~10 us).
PROGRESS_EVERY = 256


@contextlib.contextmanager
def progress_bar(total: int, quiet: bool) -> Iterator[RecordSink | None]:
    """A bar of the jobs that have ended, on stderr when it is a terminal and ``quiet``
    (``--json``) is not set: the callback to call after each job, or None (nothing then
    runs per job). It disappears when the run ends."""
    if quiet or not sys.stderr.isatty():
        yield None
        return
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    count = [0]
    with Progress(TextColumn("simulating"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), TimeRemainingColumn(), console=Console(stderr=True),
                  transient=True) as bar:
        task = bar.add_task("jobs", total=total)

        def ended(record: object, grows: int, shrinks: int) -> None:
            count[0] += 1
            if count[0] % PROGRESS_EVERY == 0:
                bar.update(task, completed=count[0])

        yield ended


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
    p.add_argument("--out", type=Path, help="directory for jobs.csv, summary.json and the "
                                            "run's figures (usage.png, gantt.png)")
    p.add_argument("--no-figures", action="store_false", dest="figures",
                   help="with --out, draw no figures (usage.png, gantt.png): jobs.csv and "
                        "summary.json only")
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


def check_background(interarrival: float, clusters: Sequence[Cluster]) -> None:
    """InputError for a background load no cluster can serve: local users who would keep
    busy, on average, at least all of a cluster's nodes (mean size x mean run time /
    ``interarrival``) make a queue that grows without end, and the run never ends
    (``--background 1e-9`` ran for ever; docs/simulate.md)."""
    from malleable.sim.background import BackgroundSpec

    spec = BackgroundSpec(interarrival=interarrival)

    def lowest(cluster: Cluster) -> float:  # the inter-arrival that keeps it all busy
        mean_size = (spec.min_size + min(spec.max_size, cluster.nodes)) / 2
        return mean_size * spec.runtime / cluster.nodes

    worst = max(clusters, key=lowest)
    if interarrival <= lowest(worst):
        busy = lowest(worst) * worst.nodes / interarrival
        raise InputError(f"--background {interarrival:g}: local users would keep {busy:,.0f} "
                         f"nodes busy on average on cluster {worst.name}, which has "
                         f"{worst.nodes}: their queue would grow without end and the run "
                         f"never finish; give more than {lowest(worst):.4g} s")


def _title(summary: dict[str, Any]) -> str:
    return " · ".join(str(summary[k]) for k in ("workload", "approach", "policy")
                      if summary.get(k) is not None)


def _config(args: argparse.Namespace) -> SimConfig:
    from malleable.service import sim_config

    return sim_config(reconfig_cost=args.reconfig_cost, release_delay=args.release_delay,
                      background=args.background, seed=args.seed,
                      model_options=args.model_options)


def run(args: argparse.Namespace) -> int:
    if args.workload not in KOALA_WORKLOADS:  # a file: its reader imports numpy
        load_numpy()
    from malleable.metrics.runtrace import Lane, RunTrace, draw_figures
    from malleable.metrics.summary import jsonable, output_dir
    from malleable.service import (
        platform,
        platform_policy,
        stream_simulation,
        write_summary_json,
    )
    from malleable.sim.run import collector_eased
    from malleable.workloads.load import simulation_input

    if args.platform is not None:
        platform(args.platform)  # a bad --platform is refused before its [policy] is read
    policy = policy_from_args(args, *platform_policy(args.platform or "das3"))
    config = _config(args)
    if args.out is not None:
        output_dir(args.out)  # a read-only --out is refused before the run, not after it
    with collector_eased(paused=True):  # a million JobSpecs and no cycle: no pass needed
        jobs, read = simulation_input(args.workload, args.seed)
    spec, counts = args.platform, None
    if read is not None:  # an SWF file: the rules for real logs (docs/workloads.md)
        jobs, spec, counts = _as_log(read, args)
    elif args.procs_per_node is not None:
        raise InputError("--procs-per-node applies to an SWF file's --workload only")
    clusters = platform(spec or "das3")
    if config.background is not None:
        check_background(config.background.interarrival, clusters)
    if args.background_trace is not None:  # a real log's users (docs/simulate.md)
        from dataclasses import replace

        from malleable.sim.background import background_replay

        config = replace(config, background_trace=background_replay(
            args.background_trace, args.background_window, args.seed))
    if len(jobs) >= PURE_NOTE_JOBS and _pure():
        print(PURE_NOTE, file=sys.stderr)
    # Each job's record is written and dropped once it has ended (the memory of the live
    # jobs only: a million-job trace); the summary comes from running totals.
    trace = None
    watchers: list[RecordSink] = []
    if args.out is not None and args.figures:
        trace = RunTrace([Lane(c.name, c.nodes) for c in clusters])
        watchers.append(trace)
    with progress_bar(len(jobs), quiet=args.json) as ended:
        if ended is not None:
            watchers.append(ended)
        summary = stream_simulation(jobs, clusters, policy, config, args.out, watchers)
    summary.update(workload=args.workload, seed=args.seed)
    if summary["past_walltime"] and policy.name in WALLTIME_POLICIES:
        logger.warning("%d job(s) ran past their requested time: they ran on, and %s "
                       "counted each as ending at any moment from then on (docs/simulate.md, "
                       "\"Requested times\")", summary["past_walltime"], policy.name)
    if (spec or "das3") != "das3":
        summary["platform"] = spec
    if counts is not None:
        summary["trace"] = counts
    if args.out is not None:
        write_summary_json(args.out, summary)
        written = [args.out / "jobs.csv", args.out / "summary.json"]
        if trace is not None:
            written += draw_figures(trace, args.out, _title(summary))
        print(f"malleable: wrote {', '.join(str(p) for p in written)}", file=sys.stderr)
    if args.json:
        print(json.dumps(jsonable(summary)))
    else:
        print_summary(summary)
        if counts is not None:
            print("trace: " + ", ".join(f"{key} {value:g}" for key, value in counts.items()))
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
    the header's machine as ``N``; None: das3) and the summary's ``trace`` counts.

    Without ``--platform`` and ``--procs-per-node``, a log most of whose jobs are not whole
    nodes runs on ``MaxProcs`` one-processor nodes (:meth:`LogHeader.machine`): ``trace``
    then says ``processors_as_nodes 1`` and how many jobs were not whole nodes, and one
    stderr line says how to keep whole nodes (``--procs-per-node``)."""
    from malleable.workloads.swf_log import LogHeader, as_log

    log = LogHeader.of(read.header)
    spec: str | None = args.platform
    per_node: int | None = args.procs_per_node
    if spec is None and log.nodes is not None:
        spec = str(log.nodes)
        per_node = per_node if per_node is not None else log.per_node() or 1
    jobs, trace = as_log(read.jobs, log, per_node if per_node is not None else 1, read.counts)
    if args.platform is None and args.procs_per_node is None and per_node is not None:
        not_whole = int(trace["rounded_up_to_nodes"])
        machine = log.machine(not_whole, len(jobs))
        if machine is not None and machine[1] != per_node:  # processors as the unit
            jobs, trace = as_log(read.jobs, log, machine[1], read.counts)
            spec = str(machine[0])
            trace.update(processors_as_nodes=1, not_whole_nodes=not_whole)
            print(f"malleable: {not_whole:,} of {len(jobs):,} jobs of this log are not whole "
                  f"nodes of {per_node} processors: it runs on {machine[0]} one-processor "
                  f"nodes (--procs-per-node {per_node} for {log.nodes} whole nodes)",
                  file=sys.stderr)
    trace["skipped"] = read.skipped
    if args.platform is None and spec is not None:
        trace["platform_from_header"] = int(spec)
    return jobs, spec, trace
