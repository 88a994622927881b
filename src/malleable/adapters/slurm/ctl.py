"""Slurm's commands on one site, as argv lists run through a :class:`CommandRunner`.

Thin: each method builds one argv, runs it with the site's timeout and parses the
answer with :mod:`malleable.adapters.slurm.parse`. No state besides the runner.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

from malleable.adapters.shell import CommandError, CommandRunner, Result
from malleable.adapters.slurm.parse import (
    ParseError,
    SlurmJob,
    SlurmNode,
    parse_sacct,
    parse_salloc,
    parse_sbatch,
    parse_scontrol_jobs,
    parse_sinfo_json,
    parse_squeue_json,
)
from malleable.errors import ExternalError

logger = logging.getLogger(__name__)

_SEPARATOR = "@@malleable:squeue@@"
#: One remote call for nodes and queue: a constant script, never formatted with input.
#: Nodes first: a job that ends between the two reads then shows as ended with its nodes
#: still busy (too few idle nodes this cycle), never as running on nodes shown idle.
_POLL = ["sh", "-c", f"sinfo --json && echo {_SEPARATOR} && squeue --json"]

#: The hand-over of an expansion, checked and done in one remote call (a constant script;
#: the ids are its arguments): the job must still be RUNNING right before its helper gives
#: up its nodes. Handing them to a job that has just ended fails in Slurm 22.05 and leaves
#: the helper COMPLETING for good; checked from the manager's host, the window was a whole
#: SSH round trip (seconds on a loaded machine), here it is one local scontrol call.
HANDOVER_ENDED = 64
_HANDOVER = ["sh", "-c",
             'state=$(scontrol -o show job "$1") || exit 65\n'
             'case "$state" in *" JobState=RUNNING "*) ;; *) echo "job $1 is no longer '
             f'RUNNING" >&2; exit {HANDOVER_ENDED};; esac\n'
             'exec scontrol update JobId="$2" NumNodes=0', "handover"]


@dataclass(frozen=True, slots=True)
class Poll:
    """One observation of a site: every job in squeue, and every node."""

    jobs: tuple[SlurmJob, ...]
    nodes: tuple[SlurmNode, ...]


@dataclass(frozen=True, slots=True)
class Allocation:
    """What ``salloc --no-shell`` did: the job id (None if it got none) and whether granted."""

    job_id: int | None
    granted: bool
    message: str


class SlurmCtl:
    """The Slurm client commands of one site."""

    def __init__(self, runner: CommandRunner, timeout: float = 30.0,
                 partition: str | None = None, user: str | None = None) -> None:
        self.runner = runner
        self.timeout = timeout
        self.partition = partition
        self.user = user
        """The user the commands run as (None: not known)."""

    def missing(self) -> dict[str, str]:
        """What this transport cannot do on this site, by capability name (``EXPAND``), with
        why; {} for commands (they can do everything). May ask the site (ExternalError)."""
        return {}

    def _run(self, argv: Sequence[str], *, check: bool = True, input: str | None = None,
             timeout: float | None = None) -> Result:
        return self.runner.run(argv, timeout or self.timeout, check=check, input=input)

    # ------------------------------------------------------------ reading

    def poll(self) -> Poll:
        """Nodes and queue in one call (``sinfo --json`` then ``squeue --json``)."""
        out = self._run(_POLL).stdout
        nodes, sep, queue = out.partition(_SEPARATOR)
        if not sep:
            raise ExternalError("slurm poll: the output lacks the squeue part")
        try:
            return Poll(tuple(parse_squeue_json(queue)), tuple(parse_sinfo_json(nodes)))
        except ParseError as exc:
            raise ExternalError(f"slurm poll: {exc}") from None

    def show_job(self, job_id: int) -> SlurmJob | None:
        """The job as ``scontrol -o show job`` has it; None once Slurm forgot it."""
        result = self._run(["scontrol", "-o", "show", "job", str(job_id)], check=False)
        if result.rc != 0:
            if "Invalid job id" in result.stderr:
                return None
            raise CommandError(["scontrol", "-o", "show", "job", str(job_id)], result.rc,
                               result.stdout, result.stderr)
        jobs = parse_scontrol_jobs(result.stdout)
        return next((j for j in jobs if j.job_id == job_id), None)

    def accounting(self, job_ids: Sequence[int]) -> list[SlurmJob]:
        """Finished allocations from ``sacct`` (epoch times); [] when accounting has none."""
        if not job_ids:
            return []
        argv = ["env", "SLURM_TIME_FORMAT=%s", "sacct", "-X", "--parsable2", "--allusers",
                "--format=JobID,JobName,State,NNodes,Start,End",
                "--jobs=" + ",".join(str(j) for j in job_ids)]
        return parse_sacct(self._run(argv).stdout)

    def accounting_named(self, names: Sequence[str], since: str = "now-7days"
                         ) -> list[SlurmJob]:
        """Allocations (any state) whose job name is one of ``names``, from ``sacct``."""
        if not names:
            return []
        argv = ["env", "SLURM_TIME_FORMAT=%s", "sacct", "-X", "--parsable2", "--allusers",
                "--format=JobID,JobName,State,NNodes,Start,End", f"--starttime={since}",
                "--name=" + ",".join(names)]
        return parse_sacct(self._run(argv).stdout)

    def admin_level(self, user: str) -> str:
        """``user``'s Slurm admin level (None, Operator, Administrator) from sacctmgr."""
        argv = ["sacctmgr", "--noheader", "--parsable2", "show", "user", user,
                "format=AdminLevel"]
        lines = self._run(argv, check=False).stdout.split()
        return lines[0] if lines else "None"

    # ------------------------------------------------------------ acting

    def submit(self, options: Sequence[str], script: str) -> int:
        """``sbatch --parsable OPTIONS`` with the script on stdin; the job id."""
        argv = ["sbatch", "--parsable", *self._partition(), *options]
        return parse_sbatch(self._run(argv, input=script).stdout)

    def update_nodes(self, job_id: int, nodes: str) -> Result:
        """``scontrol update JobId=X NumNodes=N`` (unchecked: the caller reads it back)."""
        return self._run(["scontrol", "update", f"JobId={job_id}", f"NumNodes={nodes}"],
                         check=False)

    def hand_over(self, job_id: int, helper: int) -> Result:
        """``scontrol update JobId=HELPER NumNodes=0`` if ``job_id`` is still RUNNING, in
        one remote call; exit code :data:`HANDOVER_ENDED` when it no longer runs
        (unchecked: the caller reads the job back)."""
        return self._run([*_HANDOVER, str(job_id), str(helper)], check=False)

    def update_node_list(self, job_id: int, nodes: str) -> Result:
        """``scontrol update JobId=X NodeList=NODES``: shrink a running job to exactly
        those of its nodes (unchecked: the caller reads it back)."""
        return self._run(["scontrol", "update", f"JobId={job_id}", f"NodeList={nodes}"],
                         check=False)

    def cancel(self, job_id: int) -> Result:
        return self._run(["scancel", str(job_id)], check=False)

    def release(self, job_id: int) -> Result:
        """``scontrol release JOBID`` (a held job may start; unchecked)."""
        return self._run(["scontrol", "release", str(job_id)], check=False)

    def allocate(self, nodes: int, options: Sequence[str], wait: float) -> Allocation:
        """``salloc --no-shell --immediate=WAIT -N NODES OPTIONS``: granted or refused."""
        argv = ["salloc", "--no-shell", f"--immediate={max(1, round(wait))}",
                f"--nodes={nodes}", *self._partition(), *options]
        result = self._run(argv, check=False, timeout=wait + self.timeout)
        job_id, granted = parse_salloc(result.stderr + result.stdout)
        message = _last_error(result.stderr) or result.stderr.strip()
        return Allocation(job_id, granted and result.rc == 0, message)

    def _partition(self) -> list[str]:
        return [f"--partition={self.partition}"] if self.partition else []


def _last_error(stderr: str) -> str:
    lines = [line.strip() for line in stderr.splitlines() if "error" in line.lower()]
    return lines[-1] if lines else ""
