"""``malleable manager run``: the control loop against real Slurm sites.

Submits a workload (a KOALA workload or an SWF file) in real time, scaled by
``--time-scale``, through the same manager and policy as ``malleable simulate``, and
writes the same ``jobs.csv`` and ``summary.json``. State goes to a SQLite journal
(``--state``): after Ctrl-C, SIGTERM or a crash, the same command takes the run up
again where it was (jobs on the clusters keep running meanwhile). The run itself is
assembled by :mod:`malleable.service`; this module parses, shows progress and prints.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from malleable import argtypes
from malleable.commands.common import add_policy_arguments, policy_from_args, print_summary
from malleable.errors import ExternalError, InputError
from malleable.health import SITE_TIMEOUT

if TYPE_CHECKING:  # imported when a run starts: building the CLI parser stays light
    from malleable.service import ManagerRun, RunRequest


def register(sub: Any) -> None:
    p = sub.add_parser("manager", help="run the malleability manager against real clusters",
                       description="The malleability manager on the sites of a clusters config.")
    verbs = p.add_subparsers(dest="verb", metavar="VERB")
    verbs.required = True
    r = verbs.add_parser(
        "run", help="run a workload through a policy on real Slurm sites",
        description="Submit a workload to the configured Slurm sites in real time (scaled by "
                    "--time-scale) and place, grow and shrink its jobs with any registered "
                    "policy (--policy, or the config's [policy] table; KOALA's FPSMA by "
                    "default). Writes jobs.csv and summary.json (the format of "
                    "`malleable simulate`) to --out. Ctrl-C stops after the current cycle; the "
                    "same command then takes the run up again from --state.")
    r.add_argument("--config", type=Path, required=True, metavar="FILE",
                   help="clusters config (TOML, e.g. from `malleable testbed config`)")
    r.add_argument("--sites", metavar="A,B", help="use only these sites (default: all)")
    add_policy_arguments(r, default=None)
    r.add_argument("--workload", default="wm", metavar="NAME|PATH",
                   help="a KOALA workload name (wm, wmr, wm-prime, wmr-prime) or an SWF file")
    r.add_argument("--jobs", type=int, metavar="N", help="only the first N jobs of the workload")
    r.add_argument("--seed", type=argtypes.seed, default=1, help="seed of a generated workload")
    r.add_argument("--time-scale", type=float, default=1.0, metavar="F",
                   help="real seconds per workload second (0.05: 20 times faster; default 1)")
    r.add_argument("--poll", type=float, default=1.0, metavar="S",
                   help="seconds between manager cycles (default 1)")
    r.add_argument("--deadline", type=float, metavar="S",
                   help="stop (state kept) after S real seconds")
    r.add_argument("--site-timeout", type=float, default=SITE_TIMEOUT, metavar="S",
                   help="give a site up after S seconds unavailable without a break: its "
                        "unfinished jobs recorded failed (and cancelled there if it answers "
                        "again), probed every min(S, 60) s and used again once it answers, "
                        "the other sites go on; the run ends (exit 3) once every site is "
                        f"given up (default {SITE_TIMEOUT:g})")
    r.add_argument("--out", type=Path, default=Path("manager-run"), metavar="DIR",
                   help="directory for jobs.csv, summary.json, workload.swf (default manager-run)")
    r.add_argument("--state", type=Path, metavar="FILE",
                   help="state journal (SQLite; default DIR/state.sqlite); an existing one is "
                        "resumed")
    r.add_argument("--compare-sim", action="store_true",
                   help="also simulate the workload on clusters of the same sizes "
                        "(DIR/simulated/)")
    r.add_argument("--no-figures", action="store_false", dest="figures",
                   help="draw no figures (usage.png, gantt.png, as `simulate --out` draws "
                        "them; also in DIR/simulated/ with --compare-sim)")
    r.add_argument("--json", action="store_true", help="print the summary as one JSON object")
    r.set_defaults(func=run)
    from malleable.commands.serve import register_verbs
    register_verbs(verbs)


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
    if not args.site_timeout > 0 or not math.isfinite(args.site_timeout):
        raise InputError("--site-timeout must be a positive number of seconds")


def request(args: argparse.Namespace) -> RunRequest:
    """The run the command line asks for (policy over the config's ``[policy]``)."""
    from malleable.config import load_config
    from malleable.service import RunRequest, select_sites

    config = load_config(args.config)
    policy = policy_from_args(args, config.policy, config.source)
    return RunRequest(select_sites(config, args.sites), policy, args.workload, args.seed,
                      args.jobs, args.time_scale)


def run(args: argparse.Namespace) -> int:
    from rich.console import Console

    from malleable.metrics.summary import jsonable, output_dir
    from malleable.service import check_local_commands, finish, open_run, write_workload
    from malleable.store import Store

    _check_args(args)
    asked = request(args)
    check_local_commands(asked.sites)
    out: Path = args.out
    output_dir(out)
    store = Store.open(args.state or out / "state.sqlite")
    try:
        job = open_run(asked, store)
        try:
            write_workload(job, out)
            stopped = _drive(job, args)
            summary = finish(job, out, stopped, args.compare_sim, args.figures)
        finally:
            job.close()
    except ExternalError:  # a site did not answer: the run can go on later
        _say_state_kept(store.path)
        raise
    finally:
        store.close()
    if args.json:
        print(json.dumps(jsonable(summary)))
    else:
        print_summary(summary)
    if stopped != "done":
        Console(stderr=True).print(f"stopped ({stopped}); state saved in {store.path}: run the "
                                   "same command to take the run up again")
        return 130 if stopped == "signal" else 3
    return report_unfinished(summary)


def report_unfinished(summary: Mapping[str, Any]) -> int:
    """Say on stderr which jobs of a finished run failed or were cancelled by someone
    else (a line each, five jobs at most); the exit code: 0, or JOBS_FAILED."""
    from rich.console import Console

    unfinished = [(what, jobs) for what, jobs in
                  (("failed", summary.get("failed_jobs") or {}),
                   ("were cancelled outside the manager", summary.get("cancelled_elsewhere") or {}))
                  if jobs]
    for what, jobs in unfinished:
        shown = "; ".join(f"{job}: {why}" for job, why in list(jobs.items())[:5])
        more = f" (and {len(jobs) - 5} more)" if len(jobs) > 5 else ""
        Console(stderr=True).print(f"{len(jobs)} job(s) {what}: {shown}{more}",
                                   markup=False, highlight=False, soft_wrap=True)
    return JOBS_FAILED if unfinished else 0


JOBS_FAILED = 5
"""The exit code of a run that ended with failed jobs, or with jobs cancelled by someone
other than the manager (listed on stderr and in summary.json's ``failed_jobs`` and
``cancelled_elsewhere``)."""


def _say_state_kept(path: str | Path) -> None:
    """The note a failed run prints before its error: the state it leaves is for a resume."""
    print(f"malleable: the run's state is kept in {path} (and its directory): run the same "
          "command again to take the run up where it stopped, or delete them to start afresh",
          file=sys.stderr)


def _drive(job: ManagerRun, args: argparse.Namespace) -> str:
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from malleable.service import drive, finished, offline_sites

    with Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                  TimeElapsedColumn(), console=Console(stderr=True), transient=True) as bar:
        title = f"{job.policy.label()} on {','.join(job.adapters)}"
        task = bar.add_task(title, total=len(job.workload))

        def show(now: float) -> None:
            offline = offline_sites(job)
            note = f" [red](offline: {', '.join(offline)})[/red]" if offline else ""
            bar.update(task, completed=finished(job), description=title + note)

        return drive(job, args.poll, args.deadline, on_cycle=show,
                     site_timeout=args.site_timeout)
