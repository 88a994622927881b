"""Shrinking and expanding running Slurm jobs, each confirmed by reading the job back.

* **Shrink**: ``scontrol update JobId=X NumNodes=N``; when some of the job's nodes are
  dead (down or not answering), ``NodeList=`` with the nodes it keeps instead: the dead
  ones go first and the batch host stays (``NumNodes=N`` keeps the first N nodes of the
  job, dead or not).
* **Expand** (``SchedulerParameters=permit_job_expansion``): a helper allocation
  with no steps, ``salloc --no-shell -N K --dependency=expand:X``, charged like X (its
  account, partition, QoS, reservation) and limited to the time X has left
  (:func:`helper_charge`); then, in the same
  remote call as a check that X still runs, ``scontrol update JobId=H NumNodes=0`` hands
  its nodes to X; ``scancel H``, and
  ``scontrol update JobId=X NumNodes=ALL`` takes them up.

Every operation ends by reading the job with ``scontrol -o show job`` and returns a
:class:`ResizeResult` saying what Slurm actually did: ``DONE`` (the target size),
``PARTIAL`` (changed, not to the target) or ``REFUSED`` (unchanged), with Slurm's
reason. Nothing is assumed.

A node that leaves a job and rejoins it within a second makes the job's steps fail
("Job credential revoked"), so an expansion waits until ``rejoin_gap`` seconds have
passed since the same job's last shrink.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass, field

import malleable.adapters.slurm.hostlist as hostlist
import malleable.adapters.slurm.meta as meta
from malleable.adapters.outcomes import Outcome as Outcome  # re-exported (its old home)
from malleable.adapters.outcomes import ResizeResult as ResizeResult
from malleable.adapters.shell import CommandError
from malleable.adapters.slurm.ctl import HANDOVER_ENDED, SlurmCtl
from malleable.adapters.slurm.parse import SlurmJob, time_left
from malleable.errors import ExternalError
from malleable.model import JobState

logger = logging.getLogger(__name__)




class ResizeError(Exception):
    """The job cannot be resized at all (unknown, not running): nothing was tried."""


@dataclass
class Resizer:
    """Shrinks and expands jobs on one site through :class:`SlurmCtl`."""

    ctl: SlurmCtl
    run_tag: str = "admin"
    expand_wait: float = 5.0
    rejoin_gap: float = 1.2
    settle: float = 2.0
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], None] = time.sleep
    wall: Callable[[], float] = time.time
    """Epoch seconds (a job's time left, from its start and limit)."""
    _last_shrink: dict[int, float] = field(default_factory=dict)
    _levels: dict[str, str] = field(default_factory=dict)

    def running(self, job_id: int) -> SlurmJob:
        """The job read back; ResizeError unless it is running with nodes."""
        job = self.ctl.show_job(job_id)
        if job is None:
            raise ResizeError(f"job {job_id} is not known to Slurm")
        if job.state is not JobState.RUNNING or job.state_raw.split()[0] != "RUNNING":
            raise ResizeError(f"job {job_id} is {job.state_raw or 'in no state'}, not RUNNING")
        self._may_resize(job)
        return job

    def _may_resize(self, job: SlurmJob) -> None:
        """ResizeError unless the job is ours or we are a Slurm operator or administrator:
        checked before anything is tried (Slurm refuses another user's shrink, but an
        expansion's helper would hand its nodes to that user's job)."""
        me = self.ctl.user
        if me is None or not job.user or job.user == me or me == "root":
            return
        level = self._levels.get(me)
        if level is None:
            level = self._levels[me] = self.ctl.admin_level(me)
        if level not in ("Operator", "Administrator"):
            raise ResizeError(f"job {job.job_id} belongs to {job.user}; {me} may not resize "
                              f"it (Slurm admin level {level}: an operator or administrator "
                              "level is needed)")

    def resize(self, job_id: int, target: int, avoid: Collection[str] = (),
               on_step: Callable[[str, int], None] | None = None) -> ResizeResult:
        """Shrink or expand ``job_id`` to ``target`` nodes (a shrink releases the nodes
        named in ``avoid`` first). ``on_step`` is told each step of an expansion with the
        helper's id: ``helper`` (granted), ``handover`` (its nodes about to be given to the
        job), ``given`` (given, not yet taken up by the job: ``NumNodes=ALL``), ``handed``
        (taken up); the adapter journals them, so a restart can finish or roll back the
        expansion. It is per call: expansions of several jobs may run at once, in threads."""
        job = self.running(job_id)
        if target < job.nodes:
            return self.shrink(job_id, target, job, avoid)
        if target > job.nodes:
            return self.expand(job_id, target, job, on_step)
        return ResizeResult(job_id, job.nodes, target, job.nodes, Outcome.DONE, "already there",
                            nodes_after=job.node_list)

    # ------------------------------------------------------------ shrink

    def shrink(self, job_id: int, target: int, job: SlurmJob | None = None,
               avoid: Collection[str] = ()) -> ResizeResult:
        began = self.clock()
        job = job or self.running(job_id)
        if not 1 <= target < job.nodes:
            return self._refused(job, target, began, f"cannot shrink {job.nodes} to {target}")
        keep = keep_nodes(job, target, avoid)
        if keep is None:
            update = self.ctl.update_nodes(job_id, str(target))
        else:
            logger.info("job %d: shrinking to %s (releasing %s first)", job_id,
                        hostlist.join(keep), ",".join(sorted(avoid)))
            update = self.ctl.update_node_list(job_id, hostlist.join(keep))
        reason = "" if update.rc == 0 else _reason(update.stderr, update.stdout)
        result = self._confirm(job, target, began, reason)
        if result.after < job.nodes:
            self._note_shrink(job_id)
        return result

    # ------------------------------------------------------------ expand

    def expand(self, job_id: int, target: int, job: SlurmJob | None = None,
               on_step: Callable[[str, int], None] | None = None) -> ResizeResult:
        began = self.clock()
        job = job or self.running(job_id)
        extra = target - job.nodes
        if extra < 1:
            return self._refused(job, target, began, f"cannot expand {job.nodes} to {target}")
        charge = helper_charge(job, self.wall())
        if isinstance(charge, str):
            return self._refused(job, target, began, charge)
        self._wait_rejoin_gap(job_id)
        tag = meta.encode(meta.Tag(self.run_tag, helper_for=job_id))
        options = ["--exclusive", f"--dependency=expand:{job_id}", "--job-name=m.helper",
                   f"--comment={tag}", *charge]
        try:
            helper = self.ctl.allocate(extra, options, self.expand_wait)
        except CommandError as exc:  # salloc hung past its own limit
            self._cancel_helpers(job_id)
            return self._confirm(job, target, began, f"helper allocation: {exc}")
        if not helper.granted or helper.job_id is None:
            message = helper.message or "helper not granted"
            if helper.job_id is not None:
                self.ctl.cancel(helper.job_id)
                message += self._pending_reason(helper.job_id, extra)
            return self._confirm(job, target, began, message)
        _step(on_step, "helper", helper.job_id)
        _step(on_step, "handover", helper.job_id)
        reason = self._merge(job_id, helper.job_id, on_step)
        if reason is None:
            self.ctl.cancel(helper.job_id)
            return self._confirm(job, target, began, "the job ended during the expansion",
                                 helper.job_id)
        _step(on_step, "handed", helper.job_id)
        result = self._confirm(job, target, began, reason, helper.job_id)
        self._helper_gone(helper.job_id)
        logger.info("%s", result.describe())
        return result

    def _pending_reason(self, helper: int, extra: int) -> str:
        """Why Slurm left a refused helper pending (``scontrol`` keeps a cancelled job's
        last pending reason, e.g. ``Resources``, ``Priority``, ``Dependency``), as
        " (Slurm's reason: X)"; "" when Slurm does not say.

        ``Resources`` while ``sinfo`` shows at least ``extra`` idle nodes of the job's
        partition is the symptom of Slurm 22.05's select/linear bug after a hand-over
        (docs/slurm.md): said, with what clears it, and logged as a warning (it may also be
        nodes kept for another pending job or a reservation: not told apart)."""
        try:
            shown = self.ctl.show_job(helper)
        except CommandError:
            return ""
        if shown is None or shown.reason in ("", "None"):
            return ""
        said = f" (Slurm's reason: {shown.reason})"
        if shown.reason != "Resources":
            return said
        try:
            nodes = self.ctl.poll().nodes
        except ExternalError:
            return said
        idle = [n.name for n in nodes
                if n.idle and (not shown.partition or not n.partitions
                               or shown.partition in n.partitions)]
        if len(idle) < extra:
            return said
        hint = (f"; yet sinfo shows {len(idle)} idle node(s) ({hostlist.join(idle)}): on "
                "Slurm 22.05 this may be select/linear's bug after a hand-over (docs/slurm.md), "
                "which an administrator's `scontrol reconfigure` clears")
        logger.warning("helper %d refused for Resources%s", helper, hint)
        return said + hint

    def _merge(self, job_id: int, helper: int,
               on_step: Callable[[str, int], None] | None = None) -> str | None:
        """Hand the helper's nodes to the job (if it still runs: checked on the site in
        the same call, :meth:`SlurmCtl.hand_over`); the first error, "" if none, None
        if the job no longer runs (nothing was handed over)."""
        problems = []
        give = self.ctl.hand_over(job_id, helper)
        if give.rc == HANDOVER_ENDED:
            return None
        if give.rc != 0:
            problems.append(f"giving helper {helper}'s nodes: {_reason(give.stderr, give.stdout)}")
        self.ctl.cancel(helper)
        _step(on_step, "given", helper)
        take = self.ctl.update_nodes(job_id, "ALL")
        if take.rc != 0:
            problems.append(f"taking the nodes up: {_reason(take.stderr, take.stdout)}")
        return "; ".join(problems)

    def _helper_gone(self, helper: int) -> None:
        """Wait (up to ``settle`` s) until the cancelled helper has left the queue; warn
        if Slurm still holds it (the manager's next polls cancel or report it)."""
        deadline = self.clock() + self.settle
        while True:
            left = self.ctl.show_job(helper)
            if left is None or (left.state.finished and not left.completing):
                return
            if self.clock() >= deadline:
                logger.warning("helper allocation %d is still %s after the hand-over",
                               helper, left.state_raw or "queued")
                return
            self.sleep(0.1)

    def _note_shrink(self, job_id: int) -> None:
        """Remember when the job shrank, for the rejoin gap. Marks older than the gap no
        longer delay anything and are dropped, so this holds only the jobs shrunk in the
        last ``rejoin_gap`` seconds (a long-running service shrinks thousands of jobs)."""
        now = self.clock()
        self._last_shrink = {j: t for j, t in self._last_shrink.items()
                             if now - t < self.rejoin_gap}
        self._last_shrink[job_id] = now

    def _wait_rejoin_gap(self, job_id: int) -> None:
        last = self._last_shrink.get(job_id)
        if last is not None:
            wait = self.rejoin_gap - (self.clock() - last)
            if wait > 0:
                logger.debug("job %d shrank %.2f s ago: waiting %.2f s before expanding",
                             job_id, self.rejoin_gap - wait, wait)
                self.sleep(wait)

    def _cancel_helpers(self, job_id: int) -> None:
        for job in self.ctl.poll().jobs:
            tag = meta.decode(job.comment)
            if tag is not None and tag.helper_for == job_id and not job.state.finished:
                self.ctl.cancel(job.job_id)

    # ------------------------------------------------------------ read back

    def _confirm(self, job: SlurmJob, target: int, began: float, reason: str,
                 helper: int | None = None) -> ResizeResult:
        """Read the job back (until it shows the target or ``settle`` s pass)."""
        deadline = self.clock() + self.settle
        after = self.ctl.show_job(job.job_id)
        while (after is not None and after.nodes != target and not reason
               and self.clock() < deadline):
            self.sleep(0.05)
            after = self.ctl.show_job(job.job_id)
        if after is None:
            return ResizeResult(job.job_id, job.nodes, target, 0, Outcome.REFUSED,
                                reason or "the job is gone", self.clock() - began, helper)
        if after.state_raw.split()[0] != "RUNNING":  # ended meanwhile: nothing was gained
            ended = f"the job is {after.state_raw.split()[0] or 'in no state'}"
            return ResizeResult(job.job_id, job.nodes, target, job.nodes, Outcome.REFUSED,
                                f"{ended}; {reason}" if reason else ended,
                                self.clock() - began, helper, after.node_list)
        if after.nodes == target:
            outcome = Outcome.DONE
        elif after.nodes == job.nodes:
            outcome = Outcome.REFUSED
        else:
            outcome = Outcome.PARTIAL
        if outcome is not Outcome.DONE and not reason:
            reason = f"Slurm shows {after.nodes} nodes"
        return ResizeResult(job.job_id, job.nodes, target, after.nodes, outcome, reason,
                            self.clock() - began, helper, after.node_list)

    def _refused(self, job: SlurmJob, target: int, began: float, reason: str) -> ResizeResult:
        return ResizeResult(job.job_id, job.nodes, target, job.nodes, Outcome.REFUSED, reason,
                            self.clock() - began, nodes_after=job.node_list)


def helper_charge(job: SlurmJob, now: float) -> list[str] | str:
    """The options that make an expansion's helper allocation a good citizen: charged like
    its job (its account, partition, QoS and reservation) and ending no later than it (a
    time limit of the whole minutes the job has left, strictly fewer than its remaining
    time: 20 minutes left exactly give 19, as a job polled in its first second of running
    would). A reason instead when the job has a minute or less left (no helper can fit)."""
    options = [f"--{flag}={value}" for flag, value in
               (("account", job.account), ("partition", job.partition), ("qos", job.qos),
                ("reservation", job.reservation)) if value]
    left = time_left(job, now)
    if left is not None:
        minutes = math.ceil(left / 60) - 1  # 60 * minutes < left
        if minutes < 1:
            return (f"job {job.job_id} has {max(0, int(left))} s left before its time limit: "
                    "no helper allocation fits")
        options.append(f"--time={minutes}")
    return options


def keep_nodes(job: SlurmJob, target: int, avoid: Collection[str]) -> list[str] | None:
    """The ``target`` nodes ``job`` keeps when the nodes in ``avoid`` should go first:
    its batch host, then its other nodes not in ``avoid`` (in Slurm's order), then the
    rest. None when none of its nodes is in ``avoid`` (a plain ``NumNodes=`` does) or
    its node list is unknown."""
    if not avoid or not job.node_list:
        return None
    try:
        nodes = hostlist.expand(job.node_list)
    except hostlist.HostlistError:
        logger.warning("job %d: cannot read its node list %r", job.job_id, job.node_list)
        return None
    if not set(nodes) & set(avoid):
        return None
    first = [job.batch_host] if job.batch_host in nodes else []
    healthy = [n for n in nodes if n not in avoid and n not in first]
    dead = [n for n in nodes if n in avoid and n not in first]
    return (first + healthy + dead)[:target]


def _step(hook: Callable[[str, int], None] | None, step: str, helper: int) -> None:
    if hook is not None:
        hook(step, helper)


def _reason(stderr: str, stdout: str) -> str:
    for text in (stderr, stdout):
        for line in text.splitlines():
            if line.strip():
                return line.strip()
    return "no message"
