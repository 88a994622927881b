"""What ``malleable submit`` does on a login node: one held, tagged job per site.

The job is submitted by the user, as the user, **held** (``sbatch --hold``) with the
tag of :mod:`malleable.site.tag` in its comment; the site service releases it where
and at the size its policy places it. Without ``--site`` the job goes to the login
node's own cluster; ``--site A,B`` submits one copy to each named Slurm cluster
(``sbatch --clusters=NAME``, Slurm's multi-cluster submission) sharing one submission
id, and the service releases one copy and cancels the others. The copies' tags say how
many sites there are (``copies``), so that the service waits until it has found them all
(within ``service.copies_grace``) before it places the job; a site may be named once, and
at most :data:`~malleable.site.tag.MAX_COPIES` sites.

The batch script runs the command with its arguments quoted (never through a shell
string built from them). With ``--mpi`` the command is a ``malleable.mpi`` Python
program and its arguments: the batch script is the runner's
(:mod:`malleable.runner.launch`: the program under ``mpirun`` with its file channel in
``~/.malleable/run/JOBID/ch``, a private directory made and checked on the batch host and
on every node the job is staged to, :mod:`malleable.runner.private`) plus the channel agent
(:mod:`malleable.site.agent`), which connects to the service (``--service HOST:PORT``)
and relays its offers. Everything is checked before anything is submitted.

With a clusters config (``--config``, docs/slurm.md), each ``--site`` is a table of it and
its ``kind`` decides: a Slurm site gets the ``sbatch`` above, an OAR site (docs/oar.md)
``oarsub -J --hold -n TAG -l nodes=N[,walltime=H:MM:SS] -O OAR.%jobid%.stdout -E ...
COMMAND`` with the compact tag of
:func:`malleable.site.tag.encode_oar` as the job's name; the job id comes from oarsub's
JSON. A site with a ``host`` is reached by SSH as the config's ``user`` (who must be the
submitting user: OAR and Slurm take the job's owner from the connection), one without
runs the command here; a Slurm site with ``transport = "rest"`` is reached through its
slurmrestd with the user's own JWT (``token_file`` or ``token_command``: the job's owner is
the token's user, named in the tag): the same held, tagged job through ``POST job/submit``
(:meth:`~malleable.adapters.slurm.rest.RestCtl.submit`), run in the table's ``workdir``
(which must be set: not a shared temporary directory, since the job's output goes there).
A tag too long for OAR's job name (100 characters) is refused
before anything is submitted. ``--mpi`` on an OAR site submits the OAR runner's script
(:func:`oar_mpi_script`: the program under ``mpirun`` in the base job, its run directory
in the user's shared home, the agent beside ``mpirun``), written into the home first.
On an OAR site, a job whose ``--max`` is above its ``--min`` submitted with ``--service``
runs the job's agent (:func:`oar_command`) beside the command, so that the service can grow
and shrink it (extension jobs submitted and deleted by the agent, as the user); without
``--service`` it runs the command alone and is placed but never resized.
"""

from __future__ import annotations

import re
import secrets
import shlex
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from malleable import kinds
from malleable.adapters.oar.ctl import OarCtl
from malleable.adapters.oar.payload import hms
from malleable.adapters.shell import CommandRunner
from malleable.adapters.slurm.ctl import SlurmCtl
from malleable.adapters.slurm.parse import ParseError, parse_sbatch
from malleable.errors import ExternalError, InputError
from malleable.runner.launch import Launch, batch_script
from malleable.runner.oar import oar_script
from malleable.runner.private import PRIVATE_SH
from malleable.site import tag as tags
from malleable.site.agent import parse_address

_TIME = re.compile(r"(\d+-)?\d+(:\d{1,2}){0,2}|\d+-\d+")
_SITE = re.compile(r"[A-Za-z0-9_-]{1,64}")
#: The job's output files, in the submission directory: OAR's default names hold the job
#: name, here the tag (``OAR.m1;min=1;...;sub=ID.7.stdout``).
_OUTPUTS = ("-O", "OAR.%jobid%.stdout", "-E", "OAR.%jobid%.stderr")
#: The parts of ``--time`` (Slurm's formats): days, then H, M, S from the right.
_DAYS = re.compile(r"(\d+)-(.*)")


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
    service: str | None = None
    """The service's channel ``HOST:PORT`` (``--mpi``, and malleable jobs on OAR sites)."""
    interface: str = "eth0"
    """The nodes' network interface for MPI (``--mpi`` only)."""

    @property
    def start_size(self) -> int:
        """The size the job asks Slurm for while it waits (the service may change it)."""
        if self.initial is not None:
            return self.initial
        return self.preferred if self.preferred is not None else self.min_size


@dataclass(frozen=True, slots=True)
class Target:
    """Where one copy goes and how: the site, its kind, and its commands run as the user."""

    runner: CommandRunner
    user: str
    """The submitting user as the site sees them (local user, or the SSH user)."""
    site: str | None = None
    """None: the login node's own Slurm cluster."""
    kind: str = kinds.DEFAULT
    clusters: bool = True
    """Name the site to ``sbatch --clusters`` (a submission from another cluster's login
    node); False when the commands run on the site's own login node (SSH)."""
    timeout: float = 30.0
    ctl: SlurmCtl | None = None
    """Submit through this transport's :meth:`~SlurmCtl.submit` instead of running
    ``sbatch`` through ``runner`` (a REST site: slurmrestd with the user's token)."""


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
    twice = sorted({site for site in sub.sites if sub.sites.count(site) > 1})
    if twice:
        raise InputError(f"--site names {', '.join(twice)} more than once: one copy per site")
    if len(sub.sites) > tags.MAX_COPIES:
        raise InputError(f"--site names {len(sub.sites)} sites, at most {tags.MAX_COPIES}")
    if sub.mpi:
        _check_mpi(sub)
    elif sub.service is not None:
        try:
            parse_address(sub.service)
        except ValueError as exc:
            raise InputError(f"--service: {exc}") from None
    return tag


def _check_mpi(sub: Submission) -> None:
    if not sub.service:
        raise InputError("--mpi needs the service's channel address: --service HOST:PORT "
                         "(or MALLEABLE_SERVICE in the environment)")
    try:
        parse_address(sub.service)
    except ValueError as exc:
        raise InputError(f"--service: {exc}") from None
    program = sub.command[0]
    if not program.endswith(".py") or not Path(program).is_file():
        raise InputError(f"--mpi: the command must be a malleable.mpi Python program "
                         f"(a .py file), not {program!r}")
    if not re.fullmatch(r"[A-Za-z0-9_.-]{1,64}", sub.interface):
        raise InputError(f"--iface {sub.interface!r} is not an interface name")


def mpi_script(sub: Submission, user: str) -> str:
    """The runner's batch script with the channel agent (``--mpi``)."""
    path = Path(sub.command[0])
    agent = ("python3 -m malleable.site.agent --service "
             f"{shlex.quote(str(sub.service))} --site \"$SLURM_CLUSTER_NAME\" "
             f"--job \"$SLURM_JOB_ID\" --run-dir \"$D\" --program {shlex.quote(path.name)}")
    launch = Launch(path.name, path.read_text(), tuple(sub.command[1:]),
                    interface=sub.interface, agent=agent, keep_result=True)
    return batch_script(launch)


def _option_names(message: str) -> str:
    """A tag's complaint in the command's option names (``min 5 ...`` -> ``--min 5 ...``)."""
    first, _, rest = message.partition(" ")
    names = {"min": "--min", "max": "--max", "preferred": "--preferred", "app": "--app-model"}
    return f"{names.get(first, first)} {rest}"


def script(command: Sequence[str]) -> str:
    """The batch script: the command, each argument quoted."""
    return "#!/bin/sh\nexec " + " ".join(shlex.quote(arg) for arg in command) + "\n"


def sbatch_argv(sub: Submission, comment: str, site: str | None) -> list[str]:
    return ["sbatch", "--parsable", *sbatch_options(sub, comment, site)]


def sbatch_options(sub: Submission, comment: str, site: str | None) -> list[str]:
    """The options of a held, tagged copy (``--clusters=SITE`` when ``site`` is given)."""
    argv = ["--hold", f"--nodes={sub.start_size}", "--exclusive",
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
    """Submit the copies to Slurm from this login node (``--site``: ``sbatch --clusters``);
    the id to print (the Slurm id, or ``USER:SUB`` for several copies) and the Slurm ids."""
    return submit_to(sub, [Target(runner, user, site, timeout=timeout)
                           for site in sub.sites or (None,)])


def submit_to(sub: Submission, targets: Sequence[Target]) -> tuple[str, list[int]]:
    """Submit one copy per target (all checked first); the id to print (the job's id, or
    ``USER:SUB`` for several copies) and the sites' job ids, in the targets' order."""
    tag = check(sub)
    tag = tags.UserTag(tag.min_size, tag.max_size, tag.preferred, tag.app, tag.mpi,
                       secrets.token_hex(4), len(targets) if len(targets) > 1 else None)
    copies = [kinds.builder(t.kind, "submit", "--site")(sub, tag, t) for t in targets]
    ids = [copy() for copy in copies]  # every copy checked (made) before any is submitted
    shown = str(ids[0]) if len(ids) == 1 else f"{targets[0].user}:{tag.sub}"
    return shown, ids


#: A copy of a job for one target, checked: calling it submits it (the site's job id).
Copy = Callable[[], int]


def slurm_copy(sub: Submission, tag: tags.UserTag, target: Target) -> Copy:
    """The registry's ``submit`` builder of ``slurm``: the held, tagged ``sbatch`` copy."""
    return lambda: _sbatch(sub, tag, target)


def _sbatch(sub: Submission, tag: tags.UserTag, target: Target) -> int:
    text = mpi_script(sub, target.user) if sub.mpi else script(sub.command)
    comment = tags.encode(tag, target.user)
    if target.ctl is not None:
        return _submit_through(target.ctl, sbatch_options(sub, comment, None), text,
                               target.site)
    argv = sbatch_argv(sub, comment, target.site if target.clusters else None)
    result = target.runner.run(argv, target.timeout, check=False, input=text)
    if result.rc != 0:
        where = f" on {target.site}" if target.site else ""
        message = (result.stderr.strip().splitlines() or ["no message"])[-1]
        raise ExternalError(f"sbatch{where} refused the job: {message}")
    try:
        return parse_sbatch(result.stdout)
    except ParseError as exc:
        raise ExternalError(f"sbatch: {exc}") from None


def _submit_through(ctl: SlurmCtl, options: Sequence[str], text: str, site: str | None) -> int:
    """The job submitted through a site's transport (``options``: sbatch's, after
    ``--parsable``); ExternalError saying where it was refused."""
    try:
        return ctl.submit(options, text)
    except (ExternalError, ValueError) as exc:
        raise ExternalError(f"on {site}: {exc}") from None


# ---------------------------------------------------------------- OAR sites


def oar_copy(sub: Submission, tag: tags.UserTag, target: Target) -> Copy:
    """The registry's ``submit`` builder of ``oar``: the held ``oarsub`` copy named with the
    compact tag (InputError now if OAR could not take the name)."""
    name = oar_name(sub, tag, target.site)
    return lambda: _oarsub(sub, name, target)


def oar_name(sub: Submission, tag: tags.UserTag, site: str | None) -> str:
    """The OAR job name (the compact tag); InputError (one line) if OAR could not take it."""
    try:
        return tags.encode_oar(tag)
    except tags.TagTooLong as exc:
        raise InputError(f"--app-model: the tag makes an OAR job name of {exc.length} "
                         f"characters, over OAR's {tags.OAR_MAX_LENGTH}: shorten the model "
                         f"name ({len(tag.app)} characters) by {exc.over}") from None


def oar_walltime(limit: str) -> str:
    """A ``--time`` in Slurm's formats (minutes, MM:SS, HH:MM:SS, D-HH[:MM[:SS]]) as
    OAR's ``H:MM:SS``."""
    days, rest = 0, limit
    match = _DAYS.fullmatch(limit)
    if match:
        days, rest = int(match.group(1)), match.group(2)
        fields = [int(x) for x in rest.split(":")] + [0] * (2 - rest.count(":"))
    else:
        fields = [int(x) for x in rest.split(":")]
        fields = {1: [0, fields[0], 0], 2: [0, *fields], 3: fields}[len(fields)]
    return hms(days * 86400 + fields[0] * 3600 + fields[1] * 60 + fields[2])


def oarsub_options(sub: Submission, name: str) -> list[str]:
    """``oarsub`` options of a held, tagged copy (after ``-J``, before the command)."""
    resources = f"nodes={sub.start_size}"
    if sub.time is not None:
        resources += f",walltime={oar_walltime(sub.time)}"
    return ["--hold", "-n", name, "-l", resources, *_OUTPUTS]


#: The command of a malleable job on OAR with its agent (``sh -c`` with the service's address,
#: the site and the user's command as arguments): the run directory, the agent (it writes
#: the ``size`` and ``nodes`` files first: the command starts once ``size`` exists, 10 s at
#: most), the command, then the agent stopped and the command's exit code kept.
_OAR_AGENT = PRIVATE_SH + (
    'D="$HOME/.malleable/oar-run/$OAR_JOB_ID"; s=$1; t=$2; shift 2; '
    'private_chain "$D" || exit 95; '
    'export MALLEABLE_RUN_DIR="$D"; '
    'python3 -m malleable.site.agent --oar --service "$s" --site "$t" --job "$OAR_JOB_ID" '
    '--run-dir "$D" >>"$D/agent.log" 2>&1 & a=$!; i=0; '
    'while [ ! -e "$D/size" ] && [ $i -lt 100 ]; do sleep 0.1; i=$((i+1)); done; '
    '"$@"; rc=$?; kill "$a" 2>/dev/null; exit $rc')


def oar_command(sub: Submission, site: str | None) -> str:
    """The OAR job's command: the user's, each argument quoted; with the agent beside it for
    a malleable job when the service's channel is given."""
    command = " ".join(shlex.quote(arg) for arg in sub.command)
    if sub.service is None or sub.max_size <= sub.min_size:
        return command
    return " ".join(shlex.quote(arg) for arg in ("sh", "-c", _OAR_AGENT, "malleable-job",
                                                 sub.service, site or "", *sub.command))


#: Where an OAR ``--mpi`` job's run directories are (the shared home, expanded by the job).
OAR_RUN_ROOT = "$HOME/.malleable/run"
#: Where ``malleable submit --mpi`` writes an OAR job's script (relative: the user's home
#: over SSH, the submission directory here; OAR runs the job in the same directory).
OAR_SCRIPT_DIR = ".malleable/mpi"


def oar_mpi_script(sub: Submission, site: str | None) -> str:
    """The OAR runner's script (:func:`malleable.runner.oar.oar_script`) with the agent
    beside ``mpirun`` (``--oar --program``: extensions as the user, the shared run
    directory), its log ``agent.log`` in the run directory (``--mpi`` on OAR)."""
    path = Path(sub.command[0])
    agent = (f"python3 -m malleable.site.agent --oar --service {shlex.quote(str(sub.service))}"
             f" --site {shlex.quote(site or '')} --job \"$SLURM_JOB_ID\" --run-dir \"$D\" "
             f"--program {shlex.quote(path.name)} >>\"$D/agent.log\" 2>&1")
    launch = Launch(path.name, path.read_text(), tuple(sub.command[1:]),
                    interface=sub.interface, agent=agent, keep_result=True)
    return oar_script(launch, run_root=OAR_RUN_ROOT)


def _oarsub(sub: Submission, name: str, target: Target) -> int:
    ctl = OarCtl(target.runner, target.timeout)
    command = oar_command(sub, target.site)
    try:
        if sub.mpi:
            path = f"{OAR_SCRIPT_DIR}/{secrets.token_hex(8)}.sh"
            ctl.write(path, oar_mpi_script(sub, target.site))
            command = f"bash {path}"
        (job_id, *_) = ctl.submit(oarsub_options(sub, name), command)
    except ExternalError as exc:
        raise ExternalError(f"on {target.site}: {exc}") from None
    return job_id
