"""``malleable manager run``: the control loop against real Slurm sites.

Submits a workload (a KOALA workload or an SWF file) in real time, scaled by
``--time-scale``, through the same manager and policy as ``malleable simulate``, and
writes the same ``jobs.csv`` and ``summary.json``. State goes to a SQLite journal
(``--state``): after Ctrl-C, SIGTERM or a crash, the same command takes the run up
again where it was (jobs on the clusters keep running meanwhile).
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import secrets
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from malleable.adapters.slurm.cluster import SlurmCluster
from malleable.adapters.slurm.payload import Payload
from malleable.adapters.slurm.sites import ctl_for
from malleable.clock import ScaledClock
from malleable.commands.simulate import load_workload, print_summary
from malleable.config import ClustersConfig, SiteConfig, load_config
from malleable.errors import InputError
from malleable.manager import Manager
from malleable.metrics.summary import summarize, write_records
from malleable.model import Cluster, JobSpec
from malleable.policies.koala import Approach, KoalaPolicy
from malleable.policies.malleability import MALLEABILITY_POLICIES
from malleable.realtime import RealtimeDriver
from malleable.sim.run import SimConfig, check_jobs, simulate
from malleable.store import Resumed, RunInfo, Store, resume
from malleable.workloads.swf import write_swf

logger = logging.getLogger(__name__)


def register(sub: Any) -> None:
    p = sub.add_parser("manager", help="run the malleability manager against real clusters",
                       description="The malleability manager on the sites of a clusters config.")
    verbs = p.add_subparsers(dest="verb", metavar="VERB")
    verbs.required = True
    r = verbs.add_parser(
        "run", help="run a workload through a KOALA policy on real Slurm sites",
        description="Submit a workload to the configured Slurm sites in real time (scaled by "
                    "--time-scale) and place, grow and shrink its jobs with a KOALA approach "
                    "and malleability policy. Writes jobs.csv and summary.json (the format of "
                    "`malleable simulate`) to --out. Ctrl-C stops after the current cycle; the "
                    "same command then takes the run up again from --state.")
    r.add_argument("--config", type=Path, required=True, metavar="FILE",
                   help="clusters config (TOML, e.g. from `malleable testbed config`)")
    r.add_argument("--sites", metavar="A,B", help="use only these sites (default: all)")
    r.add_argument("--approach", choices=[a.value for a in Approach], default="pra",
                   help="job management approach (default: pra)")
    r.add_argument("--policy", choices=list(MALLEABILITY_POLICIES), default="fpsma",
                   help="malleability policy (default: fpsma)")
    r.add_argument("--workload", default="wm", metavar="NAME|PATH",
                   help="a KOALA workload name (wm, wmr, wm-prime, wmr-prime) or an SWF file")
    r.add_argument("--jobs", type=int, metavar="N", help="only the first N jobs of the workload")
    r.add_argument("--seed", type=int, default=1, help="seed of a generated workload")
    r.add_argument("--time-scale", type=float, default=1.0, metavar="F",
                   help="real seconds per workload second (0.05: 20 times faster; default 1)")
    r.add_argument("--poll", type=float, default=1.0, metavar="S",
                   help="seconds between manager cycles (default 1)")
    r.add_argument("--deadline", type=float, metavar="S",
                   help="stop (state kept) after S real seconds")
    r.add_argument("--out", type=Path, default=Path("manager-run"), metavar="DIR",
                   help="directory for jobs.csv, summary.json, workload.swf (default manager-run)")
    r.add_argument("--state", type=Path, metavar="FILE",
                   help="state journal (SQLite; default DIR/state.sqlite); an existing one is "
                        "resumed")
    r.add_argument("--compare-sim", action="store_true",
                   help="also simulate the workload on clusters of the same sizes "
                        "(DIR/simulated/)")
    r.add_argument("--json", action="store_true", help="print the summary as one JSON object")
    r.set_defaults(func=run)


# ----------------------------------------------------------------------------- assembly


@dataclass
class ManagerRun:
    """Everything one real-time run is made of."""

    info: RunInfo
    store: Store
    manager: Manager
    adapters: dict[str, SlurmCluster]
    clock: ScaledClock
    pending: list[JobSpec]
    workload: list[JobSpec]
    resumed: Resumed | None


def select_sites(config: ClustersConfig, names: str | None) -> list[SiteConfig]:
    if not names:
        return list(config.sites)
    return [config.site(name.strip()) for name in names.split(",") if name.strip()]


def build_adapters(sites: Sequence[SiteConfig], clock: ScaledClock, info: RunInfo,
                   store: Store) -> dict[str, SlurmCluster]:
    return {site.name: SlurmCluster(site.name, ctl_for(site), clock, info.run_id,
                                    Payload(info.time_scale, site.speed), site.reserve,
                                    site.speed, journal=store) for site in sites}


def prepare(args: argparse.Namespace, sites: Sequence[SiteConfig], store: Store) -> ManagerRun:
    """A new run, or the run the journal holds (resumed)."""
    info = store.run_info()
    if info is None:
        workload = _workload(args)
        info = RunInfo(secrets.token_hex(4), time.time(), args.time_scale, args.approach,
                       args.policy, args.workload)
        store.begin_run(info, workload)
    else:
        _check_same_run(info, args, store.path)
        workload = store.workload()
    clock = ScaledClock(info.epoch0, info.time_scale)
    adapters = build_adapters(sites, clock, info, store)
    manager = Manager(KoalaPolicy.named(info.approach, info.policy), adapters, journal=store)
    resumed = resume(store, manager, adapters) if store.submitted() else None
    done = set(manager.records)
    pending = [spec for spec in workload if spec.id not in done]
    return ManagerRun(info, store, manager, adapters, clock, pending, workload, resumed)


def _check_args(args: argparse.Namespace) -> None:
    """Bad numbers stop before anything is created."""
    if not args.poll > 0 or not math.isfinite(args.poll):
        raise InputError("--poll must be a positive number of seconds")
    if not args.time_scale > 0 or not math.isfinite(args.time_scale):
        raise InputError("--time-scale must be a positive number")
    if args.jobs is not None and args.jobs < 1:
        raise InputError("--jobs must be at least 1")
    if args.deadline is not None and not args.deadline > 0:
        raise InputError("--deadline must be a positive number of seconds")


def _workload(args: argparse.Namespace) -> list[JobSpec]:
    jobs = load_workload(args.workload, args.seed)
    if args.jobs is not None:
        jobs = sorted(jobs, key=lambda j: j.submit_time)[:args.jobs]
    check_jobs(jobs)
    return jobs


def _check_same_run(info: RunInfo, args: argparse.Namespace, source: str) -> None:
    asked = {"approach": args.approach, "policy": args.policy, "workload": args.workload,
             "time-scale": args.time_scale}
    held = {"approach": info.approach, "policy": info.policy, "workload": info.workload,
            "time-scale": info.time_scale}
    differ = [f"--{k} {asked[k]} (the run has {held[k]})" for k in asked if asked[k] != held[k]]
    if differ:
        raise InputError("this state file holds another run: " + "; ".join(differ) +
                         ". Use the run's options, or a new --state file", source=source)


# ----------------------------------------------------------------------------- run


def run(args: argparse.Namespace) -> int:
    _check_args(args)
    sites = select_sites(load_config(args.config), args.sites)
    out: Path = args.out
    _mkdir(out)
    store = Store.open(args.state or out / "state.sqlite")
    try:
        job = prepare(args, sites, store)
        try:
            summary, stopped = _execute(job, args, out)
        finally:
            for adapter in job.adapters.values():
                adapter.close()
    finally:
        store.close()
    if args.json:
        print(json.dumps(_jsonable(summary)))
    else:
        print_summary({k: v for k, v in summary.items() if not isinstance(v, dict | list)})
    if stopped != "done":
        Console(stderr=True).print(f"stopped ({stopped}); state saved in {store.path}: run the "
                                   "same command to take the run up again")
        return 130 if stopped == "signal" else 3
    return 0


def _execute(job: ManagerRun, args: argparse.Namespace,
             out: Path) -> tuple[dict[str, Any], str]:
    write_swf(out / "workload.swf", job.workload, f"manager run {job.info.run_id}")
    stopped = _drive(job, args)
    summary = _outputs(job, out, stopped)
    if args.compare_sim:
        summary["simulated"] = _simulate(job, out)
    (out / "summary.json").write_text(json.dumps(_jsonable(summary), indent=2) + "\n")
    return summary, stopped


def _drive(job: ManagerRun, args: argparse.Namespace) -> str:
    total = len(job.workload)
    with Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task(f"{job.info.approach}/{job.info.policy} on "
                            f"{','.join(job.adapters)}", total=total)

        def on_cycle(now: float) -> None:
            finished = sum(1 for r in job.manager.records.values() if r.state.finished)
            bar.update(task, completed=finished)

        driver = RealtimeDriver(job.manager, job.clock, job.pending, args.poll,
                                on_cycle=on_cycle)
        outcome = driver.run(args.deadline)
    logger.info("%d cycles, mean %.3f s", outcome.cycles,
                sum(outcome.cycle_seconds) / max(1, len(outcome.cycle_seconds)))
    return outcome.stopped


def _outputs(job: ManagerRun, out: Path, stopped: str) -> dict[str, Any]:
    records = list(job.manager.records.values())
    ends = [r.end for r in records if r.end is not None]
    start = min((s.submit_time for s in job.workload), default=0.0)
    end = max(ends, default=start)
    nodes = sum(_nodes(a) for a in job.adapters.values())
    busy = sum(r.node_seconds() for r in records)
    utilization = busy / (nodes * end) if nodes and end > 0 else 0.0
    summary = summarize(records, job.manager.operations, end - start, utilization)
    summary.update(approach=job.info.approach, policy=job.info.policy,
                   workload=job.info.workload, time_scale=job.info.time_scale,
                   run_id=job.info.run_id, sites=",".join(job.adapters), nodes=nodes,
                   stopped=stopped, resizes=job.store.resize_outcomes())
    write_records(out / "jobs.csv", records)
    return summary


def _simulate(job: ManagerRun, out: Path) -> dict[str, Any]:
    """The same workload, policy and cluster sizes in the simulator."""
    clusters = [Cluster(name, max(1, _nodes(a)), a.reserve, a.speed)
                for name, a in job.adapters.items()]
    result = simulate(job.workload, clusters,
                      KoalaPolicy.named(job.info.approach, job.info.policy), SimConfig())
    summary = summarize(result.records, result.operations, result.makespan, result.utilization)
    target = out / "simulated"
    _mkdir(target)
    write_records(target / "jobs.csv", result.records)
    (target / "summary.json").write_text(json.dumps(_jsonable(summary), indent=2) + "\n")
    return summary


def _nodes(adapter: SlurmCluster) -> int:
    view = adapter.last_view
    return (view if view is not None else adapter.observe()).nodes


def _mkdir(path: Path) -> None:
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"cannot create output directory: {exc.strerror}",
                         source=str(path)) from None


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, float) and math.isnan(value):
        return None
    return value
