"""``malleable submit``: a user's malleable job, submitted held and tagged for the site
service (docs/site.md)."""

from __future__ import annotations

import argparse
import getpass
from typing import Any

from malleable.errors import InputError


def register(sub: Any) -> None:
    p = sub.add_parser(
        "submit", help="submit a malleable job for the site service to place, grow and shrink",
        description="Submit COMMAND as a malleable Slurm job: held (sbatch --hold), its "
                    "size range in a versioned JSON tag in the job comment (docs/site.md). "
                    "The site service (`malleable manager serve`) releases it where and at the "
                    "size its policy chooses, then grows and shrinks it within [--min, --max]. "
                    "Prints the Slurm job id (with several --site: the service's id USER:SUB).",
        usage="malleable submit [--site S] --min A --max B [--preferred P] [--initial I] "
              "[--time LIMIT] [--app-model M] [--mpi] -- COMMAND ARGS...")
    p.add_argument("--site", metavar="S[,T...]",
                   help="Slurm cluster(s) to submit to (sbatch --clusters); default: this "
                        "login node's cluster. With several, the service places one copy")
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
                   help="mark the job as a malleable.mpi application (tag field mpi)")
    p.add_argument("command", nargs=argparse.REMAINDER, metavar="-- COMMAND ARGS...",
                   help="the program and its arguments, after --")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from malleable.adapters.shell import LocalRunner
    from malleable.site.submit import Submission, submit

    command = list(args.command)
    if command[:1] == ["--"]:
        command = command[1:]
    sites = tuple(s.strip() for s in (args.site or "").split(",") if s.strip())
    if args.site is not None and not sites:
        raise InputError("--site: name at least one cluster")
    request = Submission(args.min, args.max, tuple(command), args.preferred, args.initial,
                         args.time, args.app_model, args.mpi, sites)
    shown, _ids = submit(request, LocalRunner(), getpass.getuser())
    print(shown)
    return 0
