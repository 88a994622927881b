"""``malleable resize``: shrink or expand a running Slurm job, confirmed by Slurm."""

from __future__ import annotations

import argparse
import json
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from malleable.config import load_config
from malleable.errors import ExternalError, InfeasibleError, InputError

if TYPE_CHECKING:  # the Slurm adapter (paramiko) is imported when the command runs
    from malleable.adapters.slurm.ctl import SlurmCtl


def register(sub: Any) -> None:
    p = sub.add_parser(
        "resize", help="shrink or expand a running Slurm job on a configured site",
        description="Resize a running Slurm job to NODES nodes: a shrink with `scontrol update "
                    "NumNodes`, an expansion through a helper allocation (salloc "
                    "--dependency=expand). Waits until Slurm shows the new size (read back with "
                    "scontrol). Exit 0 when the job has NODES nodes; 3 with Slurm's reason when "
                    "the resize was refused or only partly done; 2 for a job that is not running "
                    "or that the connecting user may not resize (another user's, without "
                    "Slurm's operator level); 4 for more nodes than the site has.",
    )
    p.add_argument("--config", type=Path, required=True, metavar="FILE",
                   help="clusters config (TOML, e.g. from `malleable testbed config`)")
    p.add_argument("--site", required=True, help="site name in the config")
    p.add_argument("--expand-wait", type=float, default=5.0, metavar="S",
                   help="seconds to wait for free nodes when expanding (default 5)")
    p.add_argument("--json", action="store_true", help="print the result as one JSON object")
    p.add_argument("jobid", type=int, metavar="JOBID", help="Slurm job id")
    p.add_argument("nodes", type=int, metavar="NODES", help="the job's new number of nodes")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from malleable.adapters.slurm.resize import Outcome, ResizeError, Resizer
    from malleable.kinds import commands

    if args.nodes < 1:
        raise InputError(f"NODES must be at least 1, not {args.nodes} (use scancel to end a job)")
    if not args.expand_wait > 0:
        raise InputError("--expand-wait must be a positive number of seconds")
    site = load_config(args.config).site(args.site)
    ctl = commands(site, as_kind="slurm")  # Slurm's commands, over the site's transport
    try:
        total = _site_nodes(ctl)
        if args.nodes > total:
            raise InfeasibleError(f"{site.name}: {args.nodes} nodes asked; the site has {total}"
                                  f"{' in partition ' + ctl.partition if ctl.partition else ''}")
        resizer = Resizer(ctl, run_tag="admin", expand_wait=args.expand_wait)
        try:
            result = resizer.resize(args.jobid, args.nodes)
        except ResizeError as exc:
            raise InputError(f"{site.name}: {exc}") from None
    finally:
        ctl.runner.close()
    if args.json:
        body = asdict(result)
        body["outcome"] = result.outcome.value
        body["site"] = site.name
        print(json.dumps(body))
    else:
        print(f"{site.name}: {result.describe()} in {result.seconds:.2f} s")
    if result.outcome is not Outcome.DONE:
        raise ExternalError(f"{site.name}: {result.describe()}")
    return 0


def _site_nodes(ctl: SlurmCtl) -> int:
    """Nodes in service on the site (in its partition, if one is configured)."""
    part = ctl.partition
    return sum(n.in_service for n in ctl.poll().nodes if part is None or part in n.partitions)
