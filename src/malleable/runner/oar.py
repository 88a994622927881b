"""One malleable MPI job on an OAR site: its processes kept in step with a job collection.

OAR 2.5 cannot resize a running job (docs/oar.md), so the allocation is the adapter's
emulation: a *base* job runs ``mpirun`` (the batch script of :func:`oar_script`, the
Slurm runner's script with OAR's environment) and each node added later is one
single-node *extension* job that holds its node while the base job runs. The channel,
the offers and the answers are the Slurm runner's (:class:`~malleable.runner.job.MpiJob`);
only the allocation differs:

* **grow**: submit the extension jobs in one ``oarsub --array K``, wait until OAR runs
  them, and learn the new hosts from their ``assigned_network_address``; the program is
  staged there and offered the new total; extensions it declines are deleted at once;
* **shrink**: offer first; once the new process set took over, ``oardel`` the
  extensions of the nodes no longer used. The base job's nodes stay allocated until
  the job ends (OAR cannot give part of a job back).

The run directory (program, node list, hostfile, channel, result) is in the user's home,
which OAR sites share between the login host and the nodes (the testbed's do): the runner
reads it on the login host, and it is the same wherever OAR starts the base job's script.
The nodes' MPI names are their containers' host names, as on Slurm (several emulated
nodes share a container); the batch script puts the node whose host it runs on first.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Self

from malleable.adapters.common import NoCommands
from malleable.adapters.oar.ctl import OarCtl
from malleable.adapters.oar.parse import OarJob
from malleable.adapters.oar.payload import OarPayload
from malleable.adapters.shell import CommandRunner
from malleable.adapters.slurm.ctl import SlurmCtl
from malleable.errors import ExternalError
from malleable.model import JobState
from malleable.runner.job import JobLook, MpiJob
from malleable.runner.launch import Launch, batch_script, run_dir_line, stage_command
from malleable.runner.nodes import _WRITE, NodeShell

logger = logging.getLogger(__name__)

#: OAR states -> the ``JobState`` words :class:`MpiJob` reads (anything else: ended).
_STATES = {"Waiting": "PENDING", "Hold": "PENDING", "toLaunch": "PENDING",
           "toAckReservation": "PENDING", "Launching": "PENDING", "Running": "RUNNING",
           "Finishing": "COMPLETING", "Terminated": "COMPLETED", "Error": "FAILED"}

#: The node list of the Slurm script, replaced by OAR's: every node of ``$OAR_NODEFILE``
#: once; the node whose host name is this host's goes first (mpirun and rank 0 run here).
_SLURM_NODES = 'OTHERS=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | grep -vx ' \
    '"$SLURMD_NODENAME")\nfor n in "$SLURMD_NODENAME" $OTHERS; do'
_OAR_NODES = ('ME=$(hostname); ALL=$(awk \'!seen[$0]++\' "$OAR_NODEFILE")\n'
              'FIRST=$(for n in $ALL; do '
              '[ "$(ssh -o BatchMode=yes "$n" hostname < /dev/null)" = "$ME" ] '
              '&& echo "$n" && break; done)\n'
              '[ -n "$FIRST" ] || exit 96\n'
              'for n in "$FIRST" $(printf "%s\\n" $ALL | grep -vx "$FIRST"); do')


#: On OAR the run directory is in the shared home: a node only says its host name (a
#: copy through ``cat >`` would truncate the very file the loop reads).
_OAR_STAGE = 'h=$(ssh -o BatchMode=yes "$n" hostname < /dev/null)'


def oar_script(launch: Launch, run_root: str | None = None) -> str:
    """The Slurm runner's batch script with OAR's job id and node file, no staging.

    ``run_root``: a shell expression (``$HOME/.malleable/run``) for the directory of the
    run directories, expanded where the job runs, instead of the launch's fixed
    ``workdir`` (``malleable submit --mpi`` does not know the user's home path)."""
    script = batch_script(launch)
    stage = stage_command(launch.program)
    run_dir = run_dir_line(launch.workdir) + "\n"
    if _SLURM_NODES not in script or stage not in script or run_dir not in script:
        raise ValueError("the runner's batch script has no node loop to adapt for OAR")
    if run_root is not None:
        script = script.replace(run_dir, f'D="{run_root}/$SLURM_JOB_ID"\n', 1)
    return (script.replace(_SLURM_NODES, _OAR_NODES).replace(stage, _OAR_STAGE)
            .replace("$SLURM_JOB_ID", "$OAR_JOB_ID"))


#: What a Slurm command run by an OAR job says (any call is a bug).
_NO_SLURM = "an OAR job ran a Slurm command"


@dataclass
class OarNodeShell(NodeShell):
    """Node commands on an OAR site. Files under ``shared`` (the site's /home, the same on
    its login host and every node) are read and written on the login host: no hop to a
    node. A node list is comma-separated (there is no ``scontrol`` to expand it)."""

    shared: str = "/home/"

    def _where(self, node: str, path: str) -> str | None:
        return None if path.startswith(self.shared) else node

    def read(self, node: str, path: str) -> str | None:
        result = self.run(self._where(node, path), ["cat", path], check=False)
        return result.stdout if result.rc == 0 else None

    def write(self, node: str, path: str, text: str) -> None:
        self.run(self._where(node, path), ["sh", "-c", _WRITE, "sh", path], input=text)

    def hostnames(self, node_list: str) -> list[str]:
        return [n for n in node_list.split(",") if n]


@dataclass
class OarMpiJob(MpiJob):
    """A malleable MPI program as an OAR job collection (see the module docstring)."""

    oar: OarCtl | None = None
    walltime: str = "1:00:00"
    grow_wait: float = 60.0
    script_dir: str = ".malleable/mpi"
    name: str = "mpi"

    @classmethod
    def make(cls, shell: NodeShell, launch: Launch, native_id: int | None = None,
             **options: Any) -> Self:
        """The job over ``shell`` (``oar=``: the site's OAR commands, required; ``native_id``:
        its base job, when already submitted). The runner it extends is Slurm's: its Slurm
        commands, which an OAR job does not have, refuse every call."""
        return cls(SlurmCtl(NoCommands(_NO_SLURM)), shell, launch, slurm_id=native_id,
                   **options)

    def __post_init__(self) -> None:
        if self.oar is None:
            raise ValueError("an OarMpiJob needs the site's OAR commands (oar=OarCtl)")
        self.extensions: dict[str, int] = {}  # node -> its extension job
        self._base_nodes: list[str] = []

    @property
    def _ctl(self) -> OarCtl:
        assert self.oar is not None  # checked in __post_init__
        return self.oar

    # ------------------------------------------------------------ start

    def submit(self, size: int, options: Sequence[str] = ()) -> int:
        """oarsub the program's script on ``size`` nodes; the OAR job id."""
        path = f"{self.script_dir}/{self.name}-{time.time_ns()}.sh"
        self._ctl.write(path, oar_script(self.launch))
        self._ctl.mkdir(self.launch.workdir)  # OAR errs a job whose -O/-E it cannot create
        logs = f"{self.launch.workdir}/OAR.%jobid%"
        (self.native_id,) = self._ctl.submit(
            ["-n", self.name, "-l", f"nodes={size},walltime={self.walltime}",
             "-O", f"{logs}.stdout", "-E", f"{logs}.stderr", *options], f"bash {path}")
        logger.info("submitted %s as OAR job %d on %d nodes", self.launch.program,
                    self.native_id, size)
        return self.native_id

    def _jobs(self, ids: Sequence[int]) -> dict[int, OarJob]:
        return {j.job_id: j for j in self._ctl.jobs(ids)}

    def look(self, patience: float = 30.0) -> JobLook | None:
        """The base job as :class:`MpiJob` reads it (None once OAR forgot it);
        ``patience`` is the Slurm runner's retry window, unused here (oarstat is asked
        once)."""
        if self.native_id is None:
            return None
        base = self._jobs([self.native_id]).get(self.native_id)
        if base is None:
            return None
        if base.state_raw == "Running" and not self._base_nodes:
            self._base_nodes = list(dict.fromkeys(base.nodes))
        state = _STATES.get(base.state_raw, "UNKNOWN")
        if base.state is JobState.CANCELLED:  # oardel (not an error OAR found first)
            state = "CANCELLED"
        return JobLook(state, self._batch_node(base) if base.nodes else "",
                       ",".join(self.allocation_of(base)),
                       "; ".join(base.notes) if base.state_raw == "Error" else "")

    def _slurm_state(self) -> str | None:
        """The base job's state word (as :meth:`look`); "" once OAR forgot it; None
        when ``oarstat`` failed (says nothing: the job is taken as still running). The
        Slurm runner's asks ``squeue``, which an OAR site does not answer."""
        try:
            look = self.look()
        except ExternalError as exc:
            logger.warning("job %s: oarstat failed (%s)", self.native_id, exc)
            return None
        return look.state if look is not None else ""

    def _batch_node(self, base: OarJob) -> str:
        """A node of the base job (any: the run directory is read where ``nodes`` says)."""
        return self.batch or base.nodes[0]

    def poll_started(self) -> bool:
        started = super().poll_started()
        if started and self.nodes:
            self.batch = self.nodes[0][0]  # the node mpirun runs on (the script's first)
        return started

    # ------------------------------------------------------------ allocation

    def allocation_of(self, base: OarJob) -> list[str]:
        if base.state_raw not in ("Running", "Launching"):
            return []
        running = self._jobs(list(self.extensions.values())) if self.extensions else {}
        extra = [n for n, e in self.extensions.items()
                 if running.get(e) is not None and running[e].state_raw == "Running"]
        return [*dict.fromkeys(base.nodes), *extra]

    def allocation(self) -> list[str]:
        """The base job's nodes and those of its running extension jobs."""
        look = self.look()
        return self.shell.hostnames(look.node_list if look else "")

    def _expand(self, target: int) -> list[str]:
        """Extension jobs toward ``target`` nodes; the nodes OAR gave them (maybe none)."""
        if self.native_id is None:
            raise ExternalError("the job has not been submitted")
        count = target - len(self.nodes)
        if count <= 0:
            return []
        try:
            ids = self._submit_extensions(self.native_id, count)
        except ExternalError as exc:
            logger.info("job %s: extensions refused: %s", self.native_id, exc)
            return []
        running = self._await_running(ids)
        late = [i for i in ids if i not in running]
        if late:
            self._delete_extensions(late)
            logger.warning("job %s: %d of %d extensions did not start within %.0f s",
                           self.native_id, len(late), len(ids), self.grow_wait)
        added = []
        for job_id, job in running.items():
            node = job.nodes[0]
            self.extensions[node] = job_id
            added.append(node)
        return added

    def _submit_extensions(self, base: int, count: int) -> list[int]:
        """Submit ``count`` one-node extension jobs of ``base``; their ids (ExternalError
        when refused). Here with the runner's own OAR account; the site service's runner
        asks the job's agent (:mod:`malleable.site.oarmpi`)."""
        options = ["-n", f"{self.name}+", "-l", f"nodes=1,walltime={self.walltime}"]
        return self._ctl.submit(options, OarPayload.extension(base), count)

    def _delete_extensions(self, ids: Sequence[int]) -> None:
        """Delete extension jobs of this job (``oardel``)."""
        self._ctl.delete(ids)

    def _await_running(self, ids: list[int]) -> dict[int, OarJob]:
        deadline = self.clock() + self.grow_wait
        while True:
            jobs = self._jobs(ids)
            running = {i: j for i, j in jobs.items() if j.state_raw == "Running" and j.nodes}
            settled = len(running) + sum(j.state.finished for j in jobs.values())
            if settled >= len(ids) or self.clock() >= deadline:
                return running
            self.sleep(self.poll)

    def _release(self, keep: Sequence[str]) -> None:
        """Delete the extension jobs of the nodes not in ``keep`` (the base job stays)."""
        gone = [n for n in self.extensions if n not in keep]
        if gone:
            self._delete_extensions([self.extensions.pop(n) for n in gone])

    # ------------------------------------------------------------ the end

    def cancel(self, timeout: float = 60.0) -> list[str]:
        """oardel the base job and its extensions; the processes left behind (none)."""
        if self.native_id is None:
            return []
        self._ctl.delete([self.native_id, *self.extensions.values()])
        deadline = self.clock() + timeout
        while self.clock() < deadline:
            look = self.look()
            if (look.state if look else "CANCELLED") not in ("RUNNING", "PENDING",
                                                             "COMPLETING"):
                left = self.leftovers()
                if not left:
                    return []
            self.sleep(self.poll)
        return self.leftovers()

    def _postmortem(self, job: JobLook | None) -> str:
        host = self.batch or (job.batch_host if job else "")
        if not host:
            return "no batch node known"
        rc = self.shell.read(host, f"{self.run_dir}/ch/mpirun_rc")
        out = self.shell.read(host, f"{self.launch.workdir}/OAR.{self.native_id}.stderr") or ""
        return f"mpirun rc {rc.strip() if rc else 'none'}, stderr: {out.strip()[-500:]}"


def oar_mpi_job(oar: OarCtl, launch: Launch, home: str, **options: Any) -> OarMpiJob:
    """An :class:`OarMpiJob` over a site's OAR commands, its run directory in ``home``
    (the submitting user's home, shared by the site's login host and nodes)."""
    runner: CommandRunner = oar.runner
    shell = OarNodeShell(runner, oar.timeout, shared=home.rstrip("/") + "/")
    shared = replace(launch, workdir=f"{home.rstrip('/')}/.malleable/run")
    return OarMpiJob.make(shell, shared, oar=oar, **options)
