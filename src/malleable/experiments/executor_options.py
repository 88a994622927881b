"""The options every experiment shares: where its runs execute (:mod:`.executor`).

Apart from the executor so that building the parser (``--help``) loads neither
:mod:`concurrent.futures` nor submitit.
"""

from __future__ import annotations

import argparse
from pathlib import Path

KINDS = ("local", "slurm")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options every experiment shares (``malleable experiment NAME --help``)."""
    group = parser.add_argument_group("where the runs execute")
    group.add_argument("--executor", choices=KINDS, default="local",
                       help="local: in this process or --workers processes (default); "
                            "slurm: one Slurm job array through submitit, from a login node")
    group.add_argument("--max-tasks", type=int, default=None, metavar="N",
                       help="slurm: at most N array tasks running at once (default: no cap)")
    group.add_argument("--runs-per-task", type=int, default=1, metavar="K",
                       help="slurm: K runs in each array task (default 1)")
    group.add_argument("--folder", type=Path, default=None, metavar="DIR",
                       help="slurm: submitit's folder, on a filesystem the nodes share "
                            "(default OUT/submitit)")
    group.add_argument("--resume", action="store_true",
                       help="slurm: reuse the results of tasks that finished in --folder; "
                            "submit only the others")
    group.add_argument("--partition", default=None,
                       help="slurm: the partition of the array (default: the site's default)")
    group.add_argument("--time-limit", type=int, default=60, metavar="MIN",
                       help="slurm: each task's time limit in minutes (default 60)")
