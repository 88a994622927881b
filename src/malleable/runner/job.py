"""One malleable MPI job on a Slurm site: its allocation and its processes kept in step.

:class:`MpiJob` submits the batch script of :mod:`malleable.runner.launch`, then
relays resizes between Slurm and the application (one process per node):

* **grow**: expand the Slurm allocation first (a helper allocation merged into the
  job, :class:`~malleable.adapters.slurm.resize.Resizer`), stage the program on the
  new nodes, offer the new total to the application with the hosts in rank order,
  and give back at once the nodes it does not take (``scontrol update
  NodeList=...``);
* **shrink**: ask the application first; once its new, smaller process set has
  taken over (``done-SEQ.json``) the old processes have left the released nodes,
  and the allocation shrinks to the nodes still used.

The offers, answers and completions go through the application's file channel
(:mod:`malleable.mpi.channel`) in the run directory on the batch host. An offer
the application does not answer in time is withdrawn with a new offer of its
current size; whichever of the two it answers decides.

The job is read as the adapter reads its site: ``squeue --json``, parsed by
:mod:`malleable.adapters.slurm.parse` (:func:`~malleable.adapters.slurm.parse.job_argv`,
:func:`~malleable.adapters.slurm.parse.pick_job`); its state is the one word ``scontrol``
would show (:func:`~malleable.adapters.slurm.parse.state_word`).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import malleable.adapters.slurm.meta as meta
from malleable.adapters.slurm.ctl import SlurmCtl
from malleable.adapters.slurm.parse import (
    ParseError,
    SlurmJob,
    job_argv,
    pick_job,
    run_seconds,
    state_word,
)
from malleable.adapters.slurm.resize import Outcome, Resizer
from malleable.errors import ExternalError
from malleable.runner.launch import Launch, batch_script
from malleable.runner.nodes import NodeShell

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Change:
    """What one resize did: process counts and allocation before and after, and why."""

    before: int
    after: int
    nodes_after: int
    seconds: float
    error: str = ""

    @property
    def delta(self) -> int:
        return self.after - self.before


@dataclass(frozen=True, slots=True)
class JobLook:
    """What the runner reads of its job on the site: its state as one word (``RUNNING``,
    ``COMPLETING``...: Slurm's words; the OAR runner maps its states to them), the node
    that runs the batch script, the nodes held, why it waits or failed, its output file,
    how long it has run (for messages)."""

    state: str
    batch_host: str = ""
    node_list: str = ""
    reason: str = ""
    stdout: str = ""
    run_time: str = "?"


def look_of(job: SlurmJob) -> JobLook:
    """The runner's look at a Slurm job read by :mod:`malleable.adapters.slurm.parse`."""
    seconds = run_seconds(job, time.time())
    return JobLook(state_word(job.state_raw), job.batch_host, job.node_list, job.reason,
                   job.stdout, "?" if seconds is None else f"{seconds:.0f} s")


@dataclass
class MpiJob:
    """A malleable MPI program running as one Slurm job (see the module docstring)."""

    ctl: SlurmCtl
    shell: NodeShell
    launch: Launch
    resizer: Resizer | None = None
    answer_timeout: float = 120.0
    done_timeout: float = 300.0
    linger: float = 30.0
    poll: float = 0.5
    rejoin_gap: float = 1.5
    release_timeout: float = 30.0
    """How long a shrink waits for Slurm to show the smaller allocation, per try."""
    release_tries: int = 2
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep
    slurm_id: int | None = None
    """The job's id in its resource manager (:attr:`native_id`, its neutral name)."""
    batch: str = ""
    nodes: list[tuple[str, str]] = field(default_factory=list)
    """(Slurm node, MPI host) per process, rank order: the batch host first."""
    seen: set[str] = field(default_factory=set)
    seq: int = 0
    requests_seen: int = 0
    _released_at: float = -1e9

    def __post_init__(self) -> None:
        if self.resizer is None:
            self.resizer = Resizer(self.ctl)

    @property
    def native_id(self) -> int | None:
        """The job's id in its resource manager, whatever its kind (Slurm's job id; an
        OAR job's base job id): the field's neutral name, for the runners of other kinds."""
        return self.slurm_id

    @native_id.setter
    def native_id(self, value: int | None) -> None:
        self.slurm_id = value

    # ------------------------------------------------------------ paths

    @property
    def run_dir(self) -> str:
        if self.slurm_id is None:
            raise ExternalError("the job has not been submitted")
        return self.launch.run_dir(self.slurm_id)

    def _ch(self, name: str) -> str:
        return f"{self.run_dir}/ch/{name}"

    @property
    def size(self) -> int:
        return len(self.nodes)

    # ------------------------------------------------------------ start

    def submit(self, size: int, options: Sequence[str] = ()) -> int:
        """sbatch the program on ``size`` nodes (whole nodes); the Slurm job id."""
        argv = [f"--nodes={size}", "--exclusive", "--no-requeue", *options]
        self.slurm_id = self.ctl.submit(argv, batch_script(self.launch))
        logger.info("submitted %s as Slurm job %d on %d nodes", self.launch.program,
                    self.slurm_id, size)
        return self.slurm_id

    def wait_started(self, timeout: float) -> None:
        """Wait until the job runs and its batch script has listed the nodes."""
        deadline = self.clock() + timeout
        while self.clock() < deadline:
            if self.poll_started():
                return
            self.sleep(self.poll)
        raise ExternalError(f"job {self.slurm_id} did not start within {timeout:.0f} s")

    def poll_started(self) -> bool:
        """One look: whether the job runs and its batch script has listed the nodes.

        ExternalError when the job ended before it started; a job that completed after its
        batch script listed the nodes did start (the runner only looked too late).
        """
        if self.nodes:
            return True
        job = self.look()
        state = _word(job)
        if job is not None and state in ("RUNNING", "RESIZING") and job.batch_host:
            return self._take_nodes(job.batch_host)
        if job is not None and state == "COMPLETED" and job.batch_host \
                and self._take_nodes(job.batch_host):
            # a short program on a loaded machine can run its course between two looks
            logger.warning("job %s completed before the runner saw it run (run time %s)",
                           self.slurm_id, job.run_time)
            return True
        if state and state not in ("PENDING", "CONFIGURING"):
            raise ExternalError(f"job {self.slurm_id} is {state} before the runner saw it "
                                f"start (reason: {job.reason if job else ''}); "
                                f"{self._postmortem(job)}")
        return False

    def _take_nodes(self, batch_host: str) -> bool:
        """Read the nodes file the batch script wrote; False while it is not there yet."""
        self.batch = batch_host
        listed = self.shell.read(self.batch, f"{self.run_dir}/nodes")
        if not listed:
            return False
        self.nodes = [_pair(line) for line in listed.splitlines() if line.strip()]
        self.seen.update(n for n, _ in self.nodes)
        return True

    def _postmortem(self, job: JobLook | None) -> str:
        """What the job left behind: mpirun's exit code and its output's last lines."""
        host = (job.batch_host if job else "") or self.batch
        if not host:
            return "no batch host known"
        rc = self.shell.read(host, f"{self.run_dir}/ch/mpirun_rc")
        stdout = job.stdout if job else ""
        text = self.shell.read(host, stdout) if stdout else None
        out = " | ".join((text or "").strip().splitlines()[-15:])
        listed = self.shell.read(host, f"{self.run_dir}/nodes")
        return (f"mpirun rc {rc.strip() if rc else 'none'}, nodes file "
                f"{'present' if listed else 'absent'}, output: {out or '(empty)'}")

    def describe(self) -> str:
        """One line on where the job stands (its state, the program's last progress, and
        what :meth:`_postmortem` reads), for a wait that timed out."""
        job = self.look(patience=5.0)
        return (f"job {self.slurm_id}: {_word(job) or 'gone'} "
                f"(reason {job.reason if job else ''}, run time "
                f"{job.run_time if job else '?'}), progress {self.progress()}, "
                f"exit {self.exit_code()}; {self._postmortem(job)}")

    def look(self, patience: float = 30.0) -> JobLook | None:
        """The job as ``squeue --json`` has it (None once Slurm forgot it). A failed
        squeue (a slow controller) is tried again for up to ``patience`` seconds, then
        taken as None too."""
        deadline = self.clock() + patience
        while True:
            read, job = self._show()
            if read:
                return None if job is None else look_of(job)
            if self.clock() >= deadline:
                return None
            self.sleep(self.poll)

    def _show(self) -> tuple[bool, SlurmJob | None]:
        """One ``squeue --json``: (True, the job or None once Slurm forgot it), or (False,
        None) when squeue failed or said nothing readable ("Invalid job id" is an answer:
        the job is then known to be gone)."""
        if self.slurm_id is None:
            raise ExternalError("the job has not been submitted")
        argv = job_argv(self.slurm_id)
        try:
            result = self.shell.run(None, argv, check=False)
        except ExternalError as exc:
            logger.warning("job %s: squeue failed (%s)", self.slurm_id, exc)
            return False, None
        if result.rc != 0:
            if "Invalid job id" in result.stderr:
                return True, None
            logger.warning("job %s: squeue failed (%s)", self.slurm_id,
                           result.stderr.strip() or f"exit {result.rc}")
            return False, None
        try:
            return True, pick_job(result.stdout, self.slurm_id)
        except ParseError as exc:
            logger.warning("job %s: squeue failed (%s)", self.slurm_id, exc)
            return False, None

    # ------------------------------------------------------------ reading the channel

    def progress(self) -> dict[str, Any] | None:
        return self.shell.read_json(self.batch, self._ch("progress.json"))

    def events(self) -> list[dict[str, Any]]:
        text = self.shell.read(self.batch, self._ch("events.jsonl")) or ""
        return [json.loads(line) for line in text.splitlines() if line.strip()]

    def result(self) -> dict[str, Any] | None:
        return self.shell.read_json(self.batch, f"{self.run_dir}/result.json")

    def exit_code(self) -> int | None:
        text = self.shell.read(self.batch, self._ch("exit"))
        return int(text.strip()) if text and text.strip().lstrip("-").isdigit() else None

    def ended(self) -> bool:
        """Whether mpirun has ended or Slurm no longer runs the job.

        A failed ``scontrol`` (a slow controller timing out under load) says nothing: the
        job is taken as still running. Taking it as ended made a waiting offer give up
        at once and its withdrawal overwrite it, so the application never saw the
        shrink it would have taken (the Jacobi 4 -> 2 flake of issue 12).
        """
        if self.exit_code() is not None:
            return True
        state = self._slurm_state()
        return state is not None and state not in ("RUNNING", "RESIZING", "PENDING",
                                                   "CONFIGURING")

    def _slurm_state(self) -> str | None:
        """The job's Slurm state; "" once Slurm forgot it; None when squeue failed."""
        read, job = self._show()
        if not read:
            return None
        return "" if job is None else state_word(job.state_raw)

    def requests(self) -> list[dict[str, Any]]:
        """Requests the application made since the last call (application-initiated)."""
        found: list[dict[str, Any]] = []
        while True:
            data = self.shell.read_json(self.batch, self._ch(f"request-{self.requests_seen + 1}"
                                                             ".json"))
            if data is None:
                return found
            self.requests_seen += 1
            found.append(data)

    # ------------------------------------------------------------ offers

    def _offer(self, target: int, nodes: Sequence[tuple[str, str]], mandatory: bool) -> int:
        """Offer ``target`` processes on ``nodes``; the size the application accepted."""
        self.seq += 1
        seq = self.seq
        hosts = [host for _, host in nodes]
        self.shell.write_json(self.batch, self._ch("offer.json"),
                              {"seq": seq, "target": target, "hosts": hosts,
                               "mandatory": mandatory})
        answer = self._wait_file(f"answer-{seq}.json", self.answer_timeout)
        if answer is not None:
            return int(answer["accepted"])
        if self.ended():
            logger.info("job %s ended before answering offer %d", self.slurm_id, seq)
            return self.size
        return self._withdraw(seq)

    def _withdraw(self, seq: int) -> int:
        """Offer the current size instead; the answer to whichever offer comes first."""
        self.seq += 1
        logger.warning("job %s: no answer to offer %d in %.0f s: withdrawing it",
                       self.slurm_id, seq, self.answer_timeout)
        self.shell.write_json(self.batch, self._ch("offer.json"),
                              {"seq": self.seq, "target": self.size,
                               "hosts": [h for _, h in self.nodes], "mandatory": False})
        deadline = self.clock() + self.answer_timeout
        while self.clock() < deadline and not self.ended():
            first = self.shell.read_json(self.batch, self._ch(f"answer-{seq}.json"))
            if first is not None:
                return int(first["accepted"])
            if self.shell.read_json(self.batch, self._ch(f"answer-{self.seq}.json")):
                return self.size
            self.sleep(self.poll)
        return self.size

    def _wait_file(self, name: str, timeout: float) -> dict[str, Any] | None:
        deadline = self.clock() + timeout
        while True:
            data = self.shell.read_json(self.batch, self._ch(name))
            if data is not None or self.clock() >= deadline or self.ended():
                return data
            self.sleep(self.poll)

    def _await_done(self) -> dict[str, Any]:
        done = self._wait_file(f"done-{self.seq}.json", self.done_timeout)
        if done is None:
            return {"size": self.size, "error": "no completion report (did the job end?)"}
        return done

    # ------------------------------------------------------------ allocation

    def allocation(self) -> list[str]:
        """The job's nodes as Slurm has them now."""
        job = self.look()
        return self.shell.hostnames(job.node_list if job else "")

    def _release(self, keep: Sequence[str]) -> None:
        """Shrink the allocation to ``keep`` (nodes the processes no longer use go back).

        A job that ends meanwhile (a short program on a loaded machine: Slurm then says
        "Job has already finished") has nothing left to give back.
        """
        said = ""
        for attempt in range(self.release_tries + 1):
            deadline = self.clock() + (self.release_timeout if attempt else 0.0)
            while True:
                job = self.look()
                have = self.shell.hostnames(job.node_list if job else "")
                if _word(job) not in ("RUNNING", "RESIZING") \
                        or set(have) <= set(keep):
                    return  # given back, or the job is over: Slurm took everything
                if self.clock() >= deadline:
                    break
                self.sleep(0.2)
            if attempt == self.release_tries:
                break
            if attempt:  # Slurm refused or did not answer in time: ask once more
                logger.warning("job %s: shrinking to %s again (%s)", self.slurm_id,
                               ",".join(keep), said)
            said = self._update_node_list(keep)
            self._released_at = self.clock()
        raise ExternalError(f"job {self.slurm_id}: Slurm did not shrink to {list(keep)} "
                            f"(scontrol update: {said or 'accepted'}; the allocation is "
                            f"{sorted(have)})")

    def _update_node_list(self, keep: Sequence[str]) -> str:
        """``scontrol update NodeList=``; "" when Slurm took it, else what went wrong."""
        argv = ["scontrol", "update", f"JobId={self.slurm_id}", f"NodeList={','.join(keep)}"]
        try:
            result = self.shell.run(None, argv, check=False)
        except ExternalError as exc:  # a timeout on a loaded controller
            return str(exc)
        if result.rc == 0:
            return ""
        return (result.stderr or result.stdout).strip() or f"exit {result.rc}"

    def _expand(self, target: int) -> list[str]:
        """Grow the allocation toward ``target`` nodes; the nodes added (maybe none)."""
        wait = self.rejoin_gap - (self.clock() - self._released_at)
        if wait > 0:  # a node leaving and rejoining at once breaks the job's credential
            self.sleep(wait)
        if self.resizer is None or self.slurm_id is None:
            raise ExternalError("the job has not been submitted")
        result = self.resizer.expand(self.slurm_id, target)
        if result.outcome is Outcome.REFUSED:
            logger.info("job %s: expansion refused: %s", self.slurm_id, result.reason)
            return []
        have = {n for n, _ in self.nodes}
        return [n for n in self.shell.hostnames(result.nodes_after) if n not in have]

    # ------------------------------------------------------------ resizes

    def grow(self, extra: int) -> Change:
        """Allocate up to ``extra`` more nodes and offer them; give back what is declined."""
        began, before = self.clock(), list(self.nodes)
        added = self._expand(len(before) + extra)
        if not added:
            return Change(len(before), len(before), len(before), self.clock() - began,
                          "no nodes added")
        fresh = [(n, self.shell.stage(n, f"{self.run_dir}/{self.launch.program}",
                                      self.launch.source)) for n in added]
        self.seen.update(added)
        accepted = self._offer(len(before) + len(fresh), before + fresh, False)
        error = ""
        if accepted != len(before):
            done = self._await_done()
            error = str(done.get("error", ""))
            accepted = int(done.get("size", len(before)))
        self.nodes = (before + fresh)[:accepted] if accepted > len(before) else before
        self._release([n for n, _ in self.nodes])
        return Change(len(before), self.size, len(self.allocation()), self.clock() - began,
                      error)

    def shrink(self, amount: int, mandatory: bool = False) -> Change:
        """Ask the application to leave ``amount`` nodes; then shrink the allocation."""
        began, before = self.clock(), list(self.nodes)
        target = max(1, len(before) - amount)
        accepted = self._offer(target, before[:target], mandatory)
        error = ""
        if accepted < len(before):
            done = self._await_done()
            error = str(done.get("error", ""))
            accepted = int(done.get("size", len(before)))
        if accepted < len(before):
            self.nodes = before[:accepted]
            self._release([n for n, _ in self.nodes])
        elif mandatory:
            error = error or f"the application declined a mandatory shrink to {target}"
        return Change(len(before), self.size, len(self.allocation()), self.clock() - began,
                      error)

    def resize_to(self, target: int) -> Change:
        """Grow or shrink to ``target`` processes (the demo's schedule)."""
        if target > self.size:
            return self.grow(target - self.size)
        if target < self.size:
            return self.shrink(self.size - target)
        return Change(self.size, self.size, len(self.allocation()), 0.0)

    # ------------------------------------------------------------ the end

    def wait_finished(self, timeout: float) -> int:
        """Wait for mpirun's exit code (the batch script writes it).

        A program that wrote its result while mpirun does not exit within
        ``linger`` seconds (Open MPI 4.1 waits for a job whose spawn failed) is
        taken as done: the job is cancelled and 0 returned, with a warning.
        """
        deadline = self.clock() + timeout
        result_seen: float | None = None
        while self.clock() < deadline:
            code = self.exit_code()
            if code is not None:
                return code
            if self.ended():
                code = self.exit_code()  # it may have come between the two reads
                if code is not None:
                    return code
                raise ExternalError(f"job {self.slurm_id} ended without an exit code: "
                                    f"{_word(self.look()) or 'gone'}")
            if result_seen is None and self.result() is not None:
                result_seen = self.clock()
            if result_seen is not None and self.clock() - result_seen > self.linger:
                logger.warning("job %s: the program finished but mpirun did not exit within "
                               "%.0f s; cancelling the job", self.slurm_id, self.linger)
                self.cancel()
                return 0
            self.sleep(self.poll)
        raise ExternalError(f"job {self.slurm_id} did not finish within {timeout:.0f} s")

    def cancel(self, timeout: float = 60.0) -> list[str]:
        """scancel the job and its helper allocations; the processes left behind (none)."""
        if self.slurm_id is None:
            return []
        self.ctl.cancel(self.slurm_id)
        for job in self.ctl.poll().jobs:
            tag = meta.decode(job.comment)
            if tag is not None and tag.helper_for == self.slurm_id and not job.state.finished:
                self.ctl.cancel(job.job_id)
        deadline = self.clock() + timeout
        while self.clock() < deadline:
            if (_word(self.look()) or "CANCELLED") not in ("RUNNING", "RESIZING",
                                                                 "COMPLETING"):
                left = self.leftovers()
                if not left:
                    return []
            self.sleep(self.poll)
        return self.leftovers()

    def leftovers(self) -> list[str]:
        """Processes of this run still alive on any node the job ever had."""
        needle = self.run_dir
        return [f"{node}: {line}" for node in sorted(self.seen)
                for line in self.shell.processes(node, needle)]


def _word(job: JobLook | None) -> str:
    """The job's state word; "" once it is gone."""
    return job.state if job is not None else ""


def _pair(line: str) -> tuple[str, str]:
    node, _, host = line.strip().partition(" ")
    return node, host or node
