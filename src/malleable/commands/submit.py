"""``malleable submit``: a user's malleable job, submitted held and tagged for the site
service (docs/site.md)."""

from __future__ import annotations

import argparse
import getpass
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from malleable.errors import InputError

if TYPE_CHECKING:
    from malleable.config import ClustersConfig, SiteConfig
    from malleable.site.submit import Target


def register(sub: Any) -> None:
    p = sub.add_parser(
        "submit", help="submit a malleable job for the site service to place, grow and shrink",
        description="Submit COMMAND as a malleable Slurm job: held (sbatch --hold), its "
                    "size range in a versioned JSON tag in the job comment (docs/site.md). "
                    "With --config, each --site is a table of that clusters config: an OAR "
                    "site (kind = \"oar\") gets oarsub --hold with the compact tag as the "
                    "job name (docs/oar.md: the service resumes it, at the size submitted; "
                    "with --service, a job whose --max is above --min runs its agent beside "
                    "COMMAND, through which the service grows and shrinks it; with --mpi, the "
                    "OAR runner's script, mpirun and the agent in the base job). "
                    "The site service (`malleable manager serve`) releases it where and at the "
                    "size its policy chooses, then grows and shrinks it within [--min, --max]. "
                    "Prints the Slurm job id (with several --site: the service's id USER:SUB).",
        usage="malleable submit [--config FILE] [--site S] --min A --max B [--preferred P] "
              "[--initial I] [--time LIMIT] [--app-model M] [--mpi --service HOST:PORT] "
              "-- COMMAND ARGS...")
    p.add_argument("--site", metavar="S[,T...]",
                   help="Slurm cluster(s) to submit to (sbatch --clusters), or with --config its "
                        "site table(s); default: this "
                        "login node's cluster. With several (each once, at most 32), the "
                        "service places one copy once it has found them all")
    p.add_argument("--config", type=Path, metavar="FILE",
                   help="clusters config (docs/slurm.md) naming the --site tables: their kind "
                        "(slurm or oar) and how to reach them as you (host/user/key: SSH; "
                        "transport = \"rest\": slurmrestd with your own token, in the "
                        "table's workdir; none: this machine)")
    p.add_argument("--min", type=int, required=True, metavar="A", help="fewest nodes")
    p.add_argument("--max", type=int, required=True, metavar="B", help="most nodes")
    p.add_argument("--preferred", type=int, metavar="P",
                   help="the size the job runs best at (KOALA's preferred size)")
    p.add_argument("--initial", type=int, metavar="I",
                   help="nodes asked while waiting (default: --preferred, else --min)")
    p.add_argument("--time", metavar="LIMIT", help="time limit, as sbatch --time")
    p.add_argument("--app-model", default="fixed", metavar="M",
                   help="application model name for the policy (default fixed)")
    p.add_argument("--mpi", action="store_true",
                   help="COMMAND is a malleable.mpi program (PROGRAM.py ARGS): run it under "
                        "mpirun through the runner, its offers relayed by the service")
    p.add_argument("--service", metavar="HOST:PORT",
                   default=os.environ.get("MALLEABLE_SERVICE"),
                   help="with --mpi, or a malleable job on an OAR site: the site service's "
                        "channel address (default: $MALLEABLE_SERVICE)")
    p.add_argument("--iface", default="eth0", metavar="NAME",
                   help="with --mpi: the nodes' network interface for MPI (default eth0)")
    p.add_argument("command", nargs=argparse.REMAINDER, metavar="-- COMMAND ARGS...",
                   help="the program and its arguments, after --")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from malleable.adapters.shell import LocalRunner
    from malleable.config import load_config
    from malleable.site.submit import Submission, check, submit, submit_to

    command = list(args.command)
    if command[:1] == ["--"]:
        command = command[1:]
    sites = tuple(s.strip() for s in (args.site or "").split(",") if s.strip())
    if args.site is not None and not sites:
        raise InputError("--site: name at least one cluster")
    request = Submission(args.min, args.max, tuple(command), args.preferred, args.initial,
                         args.time, args.app_model, args.mpi, sites, args.service,
                         args.iface)
    if args.config is None:
        shown, _ids = submit(request, LocalRunner(), getpass.getuser())
    else:
        if not sites:
            raise InputError("--config: name the site(s) to submit to with --site")
        check(request)  # bad arguments first, before any token is read
        targets = _targets(load_config(args.config), sites, mpi=request.mpi)
        try:
            shown, _ids = submit_to(request, targets)
        finally:
            for target in targets:
                target.runner.close()
    print(shown)
    return 0


#: Working directories a REST submission refuses: shared temporary directories, where the
#: job's output would land at a predictable path.
SHARED_TMP = ("/tmp", "/var/tmp", "/dev/shm")


def _targets(config: ClustersConfig, sites: tuple[str, ...], mpi: bool = False
             ) -> list[Target]:
    """One target per named site of the config: by SSH as its user, here, or over REST
    (slurmrestd with the user's own token: the token's user owns the job; no ``--mpi``)."""
    from malleable.adapters.slurm.sites import runner_for
    from malleable.site.submit import Target

    chosen = [config.site(name) for name in sites]  # InputError for an unknown name first
    for s in chosen:
        if s.rest is not None and mpi:
            raise InputError(f"--site {s.name}: --mpi jobs are not supported on a site reached "
                             "over REST (the service cannot check their channel credential "
                             "with unmunge there): submit to an SSH site, or without --mpi")
        if s.rest is not None and s.rest.workdir.rstrip("/") in SHARED_TMP:
            raise InputError(f"--site {s.name}: a REST submission runs in the table's workdir "
                             f"({s.rest.workdir!r}, shared by all users): set workdir = "
                             f'"/home/YOU" (your directory on the cluster) in [clusters.'
                             f"{s.name}]")
    return [_rest_target(s) if s.rest is not None else
            Target(runner_for(s), s.ssh.user if s.ssh else getpass.getuser(),
                   s.slurm_cluster or s.name if s.ssh is None else s.name, s.kind,
                   clusters=s.ssh is None, timeout=s.command_timeout) for s in chosen]


def _rest_target(site: SiteConfig) -> Target:
    """A REST site's target: its slurmrestd and the user its token is for."""
    from malleable import kinds
    from malleable.site.submit import Target

    ctl = kinds.commands(site, "--site")
    try:
        user = ctl.user  # reads the token (ExternalError if it is missing or expired)
    except BaseException:
        ctl.runner.close()
        raise
    if not user:
        ctl.runner.close()
        raise InputError(f"--site {site.name}: the REST token names no Slurm user (no 'sun' "
                         "claim): set rest_user in the site table")
    return Target(ctl.runner, user, site.name, site.kind, clusters=False,
                  timeout=site.command_timeout, ctl=ctl)
