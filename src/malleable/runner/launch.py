"""The batch script that starts a malleable MPI program inside its Slurm job (pure).

The script runs on the batch host. It writes the program (carried in the script,
base64) into a run directory ``WORKDIR/JOBID``, stages it on every node of the
job, writes ``nodes`` (node name and host name per line, batch host first) and a
``hostfile`` (one line per rank), and starts ``mpirun`` there, inside the job:

* ``--mca plm rsh``: with the Slurm launcher, processes spawned onto added hosts
  silently run on the first node;
* ``--mca ras ^slurm`` with ``--hostfile`` and ``--mca rmaps seq``: mpirun places
  rank i on line i, on the hosts the runner tells it (not Slurm's view);
* ``--bind-to none``: emulated nodes share a container's cores, so binding means
  nothing here, and Open MPI 4.1.4 (Debian 12) with ``--oversubscribe`` and the
  ``seq`` mapper binds and then crashes in its own teardown, every time
  (``opal_hwloc_base_free_topology`` in ``opal_finalize``: exit 139 even after a
  fixed-size run), sometimes before the program wrote its result;
* ``--mca btl tcp,self`` and the TCP interface: the old and the new process sets
  are separate MPI jobs that talk over TCP; shared memory between daemons of
  emulated nodes in one container crashes, so it is left out by default.

When mpirun ends, its exit code goes to ``ch/mpirun_rc`` and the job's outcome to
``ch/exit``: mpirun's code, except that a program which wrote its result counts as
a success, with a line on the job's stderr (a safety net for a crash of mpirun's
own teardown once the program is done; with ``--bind-to none`` none was seen).
"""

from __future__ import annotations

import base64
import shlex
from dataclasses import dataclass, field

from malleable.runner.private import PRIVATE_SH, RUN_ROOT

__all__ = ["RUN_ROOT", "Launch", "batch_script", "run_dir_line", "stage_command"]


@dataclass(frozen=True, slots=True)
class Launch:
    """What to run: a program's file name and text, its arguments and MPI settings."""

    program: str
    source: str
    args: tuple[str, ...] = ()
    python: str = "python3"
    interface: str | None = "eth0"
    btl: str = "tcp,self"
    workdir: str = RUN_ROOT
    """The directory of the run directories: relative (the default, ``.malleable/run``)
    means in the user's home on every host; never a world-writable directory such as
    ``/tmp`` (its parent must not be writable by others: the job refuses to run)."""
    mca: tuple[tuple[str, str], ...] = field(default=())
    agent: str = ""
    """Shell text run in the background before mpirun (the site service's channel
    agent, :mod:`malleable.site.agent`); its pid is ``$AGENT``, killed when mpirun ends."""
    keep_result: bool = False
    """Copy ``result.json`` to ``$SLURM_SUBMIT_DIR/malleable-JOBID.result.json`` at the end."""

    def __post_init__(self) -> None:
        if not self.program or "/" in self.program or self.program.startswith("."):
            raise ValueError(f"program name {self.program!r} must be a plain file name")

    def run_dir(self, job_id: int) -> str:
        return f"{self.workdir}/{job_id}"

    def mpirun_options(self) -> list[str]:
        options = ["--oversubscribe", "--bind-to", "none", "--mca", "plm", "rsh",
                   "--mca", "ras", "^slurm", "--mca", "rmaps", "seq", "--mca", "btl", self.btl]
        if self.interface:
            options += ["--mca", "btl_tcp_if_include", self.interface,
                        "--mca", "oob_tcp_if_include", self.interface]
        for key, value in self.mca:
            options += ["--mca", key, value]
        return options


_TEMPLATE = r"""#!/bin/bash
# malleable runner: {program} under mpirun, resizable through $D/ch
set -u
umask 077
{private}{rundir}
private_chain "$D" && private "$D/ch" || exit 95
base64 -d > "$D/{program}" <<'MALLEABLE_PROGRAM_END'
{payload}
MALLEABLE_PROGRAM_END
: > "$D/nodes.tmp"; : > "$D/hostfile"
OTHERS=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | grep -vx "$SLURMD_NODENAME")
for n in "$SLURMD_NODENAME" $OTHERS; do
  {stage} || exit 97
  echo "$n $h" >> "$D/nodes.tmp"; echo "$h" >> "$D/hostfile"
done
mv "$D/nodes.tmp" "$D/nodes"
{agent}mpirun {options} --hostfile "$D/hostfile" -n "$(wc -l < "$D/hostfile")" \
  {python} "$D/{program}" --channel "$D/ch" --result "$D/result.json" {args}
rc=$?
echo "$rc" > "$D/ch/mpirun_rc"
if [ "$rc" -ne 0 ] && [ -s "$D/result.json" ]; then
  # Open MPI 4.1 may crash in its own teardown after daemons were added at run time,
  # once the program has finished and written its result: the program's outcome counts.
  echo "malleable: mpirun exited with $rc after the program finished; counting success" >&2
  rc=0
fi
echo "$rc" > "$D/ch/exit"
{after}exit "$rc"
"""


def run_dir_line(workdir: str, job_var: str = "$SLURM_JOB_ID") -> str:
    """The batch script's ``D=...`` line: a relative ``workdir`` is in ``$HOME``."""
    if workdir.startswith("/"):
        return f"D={shlex.quote(workdir)}/{job_var}"
    return f'D="$HOME"/{shlex.quote(workdir)}/{job_var}'


def stage_command(program: str) -> str:
    """The batch script's copy of the program to node ``$n``, which answers its host name.

    ``/tmp`` is per machine, and the first node is the batch host itself: a plain
    ``cat > FILE`` there truncates the very file ssh is reading from, and when the remote
    side wins that race (a loaded machine) every rank runs an empty program, which
    "succeeds" at once with no output. So the copy goes to a temporary name and is renamed
    over the program; the reading side keeps the old file open to its end.
    """
    part = f"$D/.{program}.part"
    return (f'h=$(ssh -o BatchMode=yes "$n" "$PRIVATE_REMOTE \'$D\' && umask 077 && '
            f'cat > \'{part}\' && mv \'{part}\' \'$D/{program}\' && hostname" \\\n'
            f'      < "$D/{program}")')


#: The remote side of staging: the same checks as the batch host's on the node's run
#: directory (``sh -c`` of :data:`PRIVATE_SH` with the chain; the directory follows).
_REMOTE_CHECK = PRIVATE_SH + 'private_chain "$1" && private "$1/ch"'



def private_remote_line() -> str:
    """The batch script's ``PRIVATE_REMOTE=...`` line: the command :func:`stage_command`
    runs on a node before it writes there (the run directory's checks)."""
    return "PRIVATE_REMOTE=" + shlex.quote(shlex.join(["sh", "-c", _REMOTE_CHECK, "sh"])) + "\n"


def batch_script(launch: Launch) -> str:
    """The bash batch script for ``launch`` (goes to sbatch on stdin)."""
    payload = base64.encodebytes(launch.source.encode()).decode().strip()
    agent = f"{launch.agent} &\nAGENT=$!\n" if launch.agent else ""
    after = 'kill "$AGENT" 2>/dev/null\n' if launch.agent else ""
    if launch.keep_result:
        after += ('[ -s "$D/result.json" ] && cp "$D/result.json" '
                  '"${SLURM_SUBMIT_DIR:-$HOME}/malleable-$SLURM_JOB_ID.result.json"\n')
    private = PRIVATE_SH + private_remote_line()
    return _TEMPLATE.format(agent=agent, after=after, private=private,
                            rundir=run_dir_line(launch.workdir),

                            stage=stage_command(launch.program),
                            program=launch.program,
                            payload=payload, options=shlex.join(launch.mpirun_options()),
                            python=shlex.quote(launch.python), args=shlex.join(launch.args))
