"""What ``malleable submit`` does on a login node: one held, tagged ``sbatch`` per site.

The job is submitted by the user, as the user, **held** (``sbatch --hold``) with the
tag of :mod:`malleable.site.tag` in its comment; the site service releases it where
and at the size its policy places it. Without ``--site`` the job goes to the login
node's own cluster; ``--site A,B`` submits one copy to each named Slurm cluster
(``sbatch --clusters=NAME``, Slurm's multi-cluster submission) sharing one submission
id, and the service releases one copy and cancels the others.

The batch script runs the command with its arguments quoted (never through a shell
string built from them). Everything is checked before anything is submitted.
"""

from __future__ import annotations

import re
import secrets
import shlex
from collections.abc import Sequence
from dataclasses import dataclass

from malleable.adapters.shell import CommandRunner
from malleable.adapters.slurm.parse import ParseError, parse_sbatch
from malleable.errors import ExternalError, InputError
from malleable.site import tag as tags

_TIME = re.compile(r"(\d+-)?\d+(:\d{1,2}){0,2}|\d+-\d+")
_SITE = re.compile(r"[A-Za-z0-9_-]{1,64}")


@dataclass(frozen=True, slots=True)
class Submission:
    """A checked ``malleable submit`` request."""

    min_size: int
    max_size: int
    command: tuple[str, ...]
    preferred: int | None = None
    initial: int | None = None
    time: str | None = None
    app: str = "fixed"
    mpi: bool = False
    sites: tuple[str, ...] = ()

    @property
    def start_size(self) -> int:
        """The size the job asks Slurm for while it waits (the service may change it)."""
        if self.initial is not None:
            return self.initial
        return self.preferred if self.preferred is not None else self.min_size


def check(sub: Submission) -> tags.UserTag:
    """The tag of a request; InputError (one line) on any bad argument."""
    if not sub.command:
        raise InputError("no command: put it after `--`, e.g. malleable submit --min 2 "
                         "--max 8 -- ./app arg")
    tag = tags.UserTag(sub.min_size, sub.max_size, sub.preferred, sub.app, sub.mpi)
    try:
        tags.check(tag)
    except tags.BadTag as exc:
        raise InputError(_option_names(str(exc))) from None
    if sub.initial is not None and not sub.min_size <= sub.initial <= sub.max_size:
        raise InputError(f"--initial {sub.initial} is outside [--min {sub.min_size}, "
                         f"--max {sub.max_size}]")
    if sub.time is not None and not _TIME.fullmatch(sub.time):
        raise InputError(f"--time {sub.time!r}: use minutes, MM:SS, HH:MM:SS or D-HH[:MM[:SS]]")
    for site in sub.sites:
        if not _SITE.fullmatch(site):
            raise InputError(f"--site {site!r} is not a cluster name")
    return tag


def _option_names(message: str) -> str:
    """A tag's complaint in the command's option names (``min 5 ...`` -> ``--min 5 ...``)."""
    first, _, rest = message.partition(" ")
    names = {"min": "--min", "max": "--max", "preferred": "--preferred", "app": "--app-model"}
    return f"{names.get(first, first)} {rest}"


def script(command: Sequence[str]) -> str:
    """The batch script: the command, each argument quoted."""
    return "#!/bin/sh\nexec " + " ".join(shlex.quote(arg) for arg in command) + "\n"


def sbatch_argv(sub: Submission, comment: str, site: str | None) -> list[str]:
    argv = ["sbatch", "--parsable", "--hold", f"--nodes={sub.start_size}", "--exclusive",
            f"--comment={comment}", f"--job-name={_name(sub.command)}"]
    if sub.time is not None:
        argv.append(f"--time={sub.time}")
    if site is not None:
        argv.append(f"--clusters={site}")
    return argv


def _name(command: Sequence[str]) -> str:
    base = command[0].rsplit("/", 1)[-1]
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in base)[:40] or "job"


def submit(sub: Submission, runner: CommandRunner, user: str,
           timeout: float = 30.0) -> tuple[str, list[int]]:
    """Submit the copies; the id to print (the Slurm id, or ``USER:SUB`` for several
    copies) and the Slurm ids."""
    tag = check(sub)
    sub_id = secrets.token_hex(4)
    comment = tags.encode(tags.UserTag(tag.min_size, tag.max_size, tag.preferred, tag.app,
                                       tag.mpi, sub_id), user)
    ids: list[int] = []
    for site in sub.sites or (None,):
        result = runner.run(sbatch_argv(sub, comment, site), timeout, check=False,
                            input=script(sub.command))
        if result.rc != 0:
            where = f" on {site}" if site else ""
            message = (result.stderr.strip().splitlines() or ["no message"])[-1]
            raise ExternalError(f"sbatch{where} refused the job: {message}")
        try:
            ids.append(parse_sbatch(result.stdout))
        except ParseError as exc:
            raise ExternalError(f"sbatch: {exc}") from None
    shown = str(ids[0]) if len(ids) == 1 else f"{user}:{sub_id}"
    return shown, ids
