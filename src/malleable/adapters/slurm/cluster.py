"""A Slurm site as a :class:`~malleable.resources.ResourceManager`.

* **Observe**: one batched call per cycle (``squeue --json`` and ``sinfo --json``
  in one remote command; ``squeue --json`` ignores ``-j``/``-t`` in 22.05, so
  everything is filtered here). Jobs whose comment carries this run's tag
  (:mod:`~malleable.adapters.slurm.meta`) are the manager's; every other job is
  background load (``managed=False``). Nodes claimed by the manager's own pending
  jobs are not counted idle.
* **Events** come from differences between observations: a start (Slurm's start
  time), a size Slurm reports that differs from the known one, an end (Slurm's end
  time and state; from ``sacct`` when the job has left the queue; a job that is in
  neither is reported FAILED, never COMPLETED). Slurm's times have one-second
  resolution: each is taken at the middle of its second and clamped to what the
  adapter saw (never before the submission, never after the observation).
* **Dead nodes**: a node down or not answering under a running malleable job is shed at
  once (``scontrol update NodeList=`` with the nodes kept, :meth:`SlurmCluster._shed_dead`)
  if the job can do without it, before Slurm ends the whole job ``NODE_FAIL``; any shrink
  releases dead nodes first. A job whose batch host died cannot be saved: it ends
  ``NODE_FAIL`` and the manager runs it again.
* **Act**: submit with sbatch (the payload of :mod:`~malleable.adapters.slurm.payload`
  on stdin), cancel with scancel, and shrink/expand through
  :class:`~malleable.adapters.slurm.resize.Resizer`: every resize is confirmed by
  reading the job back and answered with the size Slurm shows, not the one asked.
* **Pending expansions**: with :attr:`SlurmCluster.negotiations` set and
  :attr:`SlurmCluster.pending_expansions` (off by default), a grow offer is answered
  :data:`~malleable.resources.PENDING` and the expansion (``salloc`` wait, hand-over,
  confirmation: seconds) runs in a worker; its result comes later as a job event
  (:mod:`malleable.adapters.pending`). Meanwhile the view shows the job ``growing``, the
  nodes it is about to take are not counted idle, and the job is not offered another
  resize. Shrinks (one ``scontrol update`` and its confirmation) are answered at once.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import ClassVar, Protocol

import malleable.adapters.slurm.hostlist as hostlist
import malleable.adapters.slurm.meta as meta
from malleable import faults
from malleable.adapters.common import Observed
from malleable.adapters.observing import EventLog, SharedPoll
from malleable.adapters.pending import Negotiations
from malleable.adapters.shell import CommandTimeout
from malleable.adapters.slurm.ctl import Poll, SlurmCtl
from malleable.adapters.slurm.parse import SlurmJob, holds_nodes
from malleable.adapters.slurm.payload import Payload
from malleable.adapters.slurm.resize import Outcome, ResizeError, Resizer, ResizeResult
from malleable.clock import Clock
from malleable.errors import ExternalError
from malleable.model import ClusterView, JobKind, JobSpec, JobState, RunningJob
from malleable.resources import PENDING, Capability, JobEvent

logger = logging.getLogger(__name__)


class SiteJournal(Protocol):
    """Where the adapter records Slurm ids and resizes (SQLite in real runs)."""

    def slurm_submitted(self, site: str, job_id: str, slurm_id: int) -> None: ...

    def resize_begin(self, site: str, job_id: str, slurm_id: int, before: int,
                     target: int) -> int: ...

    def resize_end(self, token: int, result: ResizeResult) -> None: ...

    def intent(self, kind: str, site: str, job_id: str, amount: int = 0,
               native_id: int | None = None, time: float = 0.0) -> int: ...

    def intent_end(self, token: int, state: str, native_id: int | None = None,
                   detail: str = "") -> None: ...

    def node_failure(self, site: str, entry: Mapping[str, object]) -> None: ...


class SlurmHooks(Protocol):
    """The adapter's public extension point: what a wrapper (the site service's Slurm site,
    :class:`~malleable.site.adapter.SiteSlurm`) adds to each poll and to a node failure.
    Given as :attr:`SlurmCluster.hooks`; without it the adapter runs as documented above."""

    def polled(self, poll: Poll) -> Poll:
        """Called with each poll before the adapter follows its jobs: the part of ``poll``
        whose run-tagged jobs may be this adapter's (the rest is only background load)."""
        ...

    def unsaveable(self, job_id: str) -> str:
        """Why a managed job that lost nodes cannot shed them, before the adapter's own
        checks ("" if the wrapper knows no reason)."""
        ...


@dataclass(slots=True)
class _Mine:
    """A job this adapter submitted (or took over after a restart)."""

    spec: JobSpec
    slurm_id: int | None
    requested: int
    submitted: float
    size: int = 0
    started: bool = False
    finished: bool = False
    changed: float = 0.0
    submit_token: int | None = None
    """The journal's open submit intent while the submission is unconfirmed (sbatch timed
    out, or the manager was killed around it): the next poll binds the job to the copy
    Slurm has, or gives it back to the manager's queue if Slurm has none."""
    todo: list[tuple[int | None, str, int | None]] = field(default_factory=list)
    """Intents to finish once the job's Slurm id is known: (token, kind, native id)."""
    abandoned: bool = False
    """The manager recorded it failed (its site was given up): any copy is cancelled."""


@dataclass
class SlurmCluster(Observed[Poll]):
    """One Slurm site (see the module docstring)."""

    kind: ClassVar[str] = "slurm"
    """Its kind in the adapter registry (:mod:`malleable.kinds`)."""
    name: str
    ctl: SlurmCtl
    clock: Clock
    run_id: str
    payload: Payload = field(default_factory=Payload)
    reserve: int = 0
    speed: float = 1.0
    journal: SiteJournal | None = None
    resizer: Resizer | None = None
    output: str = "malleable-%j.out"
    """The jobs' output (``sbatch --output``): relative, in the submitting account's working
    directory (its home over SSH), never a predictable path of a shared ``/tmp``."""
    capabilities: frozenset[Capability] = frozenset({Capability.SHRINK, Capability.EXPAND})
    resizes: list[ResizeResult] = field(default_factory=list)
    last_view: ClusterView | None = None
    _mine: dict[str, _Mine] = field(default_factory=dict)
    _by_slurm: dict[int, str] = field(default_factory=dict)
    _events: EventLog = field(default_factory=EventLog)
    _poll: SharedPoll[Poll] = field(init=False)
    stray_helpers: dict[int, dict[str, object]] = field(default_factory=dict)
    """Helper allocations of this run found stray (their job ended, or no expansion of
    this process holds them), by helper id: the parent's Slurm id, the ``scancel`` calls
    made (at most :data:`HELPER_CANCELS`) and the ``outcome`` (``cancelling``, ``gone``:
    confirmed out of the queue, ``completing``: a ghost Slurm keeps with no nodes,
    ``stuck``: still there after every cancel)."""
    _expanding: set[int] = field(default_factory=set)
    """Helper allocations held by an expansion of this process still running (each
    removed by its own expansion: several may run at once, in workers)."""
    _expanding_lock: threading.Lock = field(default_factory=threading.Lock)
    negotiations: Negotiations | None = None
    """Where negotiations answered PENDING run (None: every answer at once): the MPI
    programs' answers (:class:`~malleable.site.adapter.SiteSlurm`,
    :class:`~malleable.runner.site.MpiSite`), and expansions if :attr:`pending_expansions`."""
    pending_expansions: bool = False
    """Whether a plain expansion (no MPI program) answers PENDING too, with
    :attr:`negotiations` set."""
    close_wait: float = 30.0
    """Seconds :meth:`close` waits for negotiations in flight to end."""
    _poll_began: float = 0.0
    dead_nodes: frozenset[str] = frozenset()
    """The site's nodes down or not answering at the latest poll."""
    node_failures: list[dict[str, object]] = field(default_factory=list)
    """One entry per managed job found on dead nodes: its job, Slurm id, the dead nodes,
    and what was done (``shed`` with the resize's outcome, or why not)."""
    _lost: set[tuple[int, str]] = field(default_factory=set)
    missing: dict[str, str] = field(default_factory=dict)
    """Capabilities the transport cannot give on this site (``EXPAND``), with why."""
    hooks: SlurmHooks | None = None
    """A wrapper's additions to each poll and node failure (:class:`SlurmHooks`)."""

    def __post_init__(self) -> None:
        if self.resizer is None:
            self.resizer = Resizer(self.ctl, run_tag=self.run_id)
        try:  # a transport that cannot do something declares it absent (REST on 22.05)
            missing = self.ctl.missing()
        except ExternalError as exc:
            logger.warning("%s: cannot ask what the transport supports (%s); every "
                           "capability stays declared", self.name, exc)
            missing = {}
        for capability, why in missing.items():
            logger.warning("%s: no %s: %s", self.name, capability, why)
            self.capabilities = self.capabilities - {Capability[capability]}
        self.missing = dict(missing)
        self._poll = SharedPoll(lambda: self.refresh())  # looked up at each call

    # ------------------------------------------------------------ observing

    def refresh(self) -> None:
        """Take one observation now (the driver calls this ahead of the cycle)."""
        self._began()
        poll = self.ctl.poll()
        now = self.clock.now()
        managed = poll if self.hooks is None else self.hooks.polled(poll)
        self._bind(managed)
        self._sweep(managed)
        self._finish_intents()  # with hooks too: the site service's restarts leave intents
        self._follow_all(poll, now)
        self._take(poll, managed)

    def _take(self, poll: Poll, managed: Poll) -> None:
        """Shed the dead nodes of the jobs in ``managed`` (this site's part of ``poll``),
        then keep ``poll`` as the site's latest observation."""
        self.dead_nodes = frozenset(n.name for n in poll.nodes if n.dead)
        shed = self._shed_dead(managed) if self.dead_nodes else False
        self._poll.taken(poll)
        if shed:  # this poll shows the sizes before the shed: the next use polls again
            self._stale()

    def close(self) -> None:
        """Close the connection to the site (its jobs keep running), once the negotiations
        in flight have ended (:attr:`close_wait` seconds at most: one still running then
        is left to the journal's intents, finished or rolled back at the next start)."""
        if self.negotiations is not None:
            left = self.negotiations.wait(self.close_wait)
            if left:
                logger.warning("%s: negotiations of %s still running after %.0f s; the next "
                               "start with the same state finishes or rolls them back",
                               self.name, ", ".join(left), self.close_wait)
        self.ctl.runner.close()

    def _view(self, poll: Poll) -> ClusterView:
        partition = self.ctl.partition
        nodes = [n for n in poll.nodes if partition is None or partition in n.partitions]
        claimed = sum(m.requested for m in self._mine.values()
                      if not m.started and not m.finished)
        if self.negotiations is not None:  # grows about to take idle nodes
            claimed += self.negotiations.acquiring()
        running: dict[str, RunningJob] = {}
        pending = 0
        # The poll reads the nodes, then the jobs (both transports): a job that starts
        # between the two reads shows RUNNING on nodes that still read IDLE. Counted idle,
        # they were offered to grows that Slurm then refused ("nodes busy", 2016; seen on
        # 24.11 over REST, docs/notes/issue-37-lead7.md). A node a job holds is not idle.
        idle = {n.name for n in nodes if n.idle}
        for job in poll.jobs:
            if idle and holds_nodes(job):  # whatever its partition
                idle.difference_update(_nodes_of(job))
            if partition is not None and job.partition and job.partition != partition:
                continue
            if job.state is JobState.PENDING:
                pending += 1
            elif holds_nodes(job) and not job.completing:
                # A completing job's nodes are not idle, but it has ended: the policy
                # must neither count it as running nor try to resize it.
                entry = self._running(job)
                running[entry.id] = entry
        return ClusterView(self.name, sum(n.in_service for n in nodes),
                           max(0, len(idle) - claimed), self.reserve,
                           MappingProxyType(running), pending, self.speed)

    def _running(self, job: SlurmJob) -> RunningJob:
        mine = self._mine.get(self._by_slurm.get(job.job_id, ""))
        start = self.clock.from_epoch(job.start_time or 0.0)
        if mine is not None and not mine.finished:
            flight = None if self.negotiations is None else self.negotiations.get(mine.spec.id)
            if flight is not None:  # a negotiation in flight: policies leave it alone
                grow = flight.amount if flight.kind == "grow" else 0
                return RunningJob(mine.spec, self.name, job.nodes, start, True,
                                  releasing=flight.amount - grow, growing=grow)
            return RunningJob(mine.spec, self.name, job.nodes, start, True)
        spec = JobSpec(f"slurm:{self.name}:{job.job_id}", JobKind.RIGID, job.nodes, job.nodes,
                       job.nodes, app="fixed", user=job.user)
        return RunningJob(spec, self.name, job.nodes, start, False)

    # ------------------------------------------------------------ events

    def _bind(self, poll: Poll) -> None:
        """Match jobs taken over after a restart (known by tag only) to their Slurm ids."""
        unbound = {m.spec.id: m for m in self._mine.values()
                   if m.slurm_id is None and not m.abandoned}
        if not unbound:
            return
        # Several copies (a crash between sbatch and the journal, then a second try):
        # the one running (else the oldest) is adopted; _sweep cancels the others.
        ranked = sorted(poll.jobs, key=lambda j: (j.state is not JobState.RUNNING, j.job_id))
        for job in ranked:
            tag = meta.decode(job.comment)
            if (tag is not None and tag.run == self.run_id and tag.job in unbound
                    and tag.helper_for is None and not job.state.finished):
                self._bound(unbound.pop(tag.job), job.job_id)

    def _bound(self, mine: _Mine, slurm_id: int) -> None:
        """The Slurm job of a job known by tag only is ``slurm_id``: journal it."""
        mine.slurm_id = slurm_id
        self._by_slurm[slurm_id] = mine.spec.id
        logger.info("%s: %s is Slurm job %d (adopted)", self.name, mine.spec.id, slurm_id)
        if self.journal is not None:
            self.journal.slurm_submitted(self.name, mine.spec.id, slurm_id)
            if mine.submit_token is not None:
                self.journal.intent_end(mine.submit_token, "adopted", slurm_id,
                                        "the copy Slurm had was adopted")
        mine.submit_token = None

    def _finish_intents(self) -> None:
        """Carry out what a restart left half done, once the job's Slurm id is known."""
        for mine in self._mine.values():
            if not mine.todo or (mine.slurm_id is None and not mine.finished):
                continue
            todo, mine.todo = mine.todo, []
            for token, kind, native in todo:
                self._finish_intent(mine, token, kind, native)

    def _finish_intent(self, mine: _Mine, token: int | None, kind: str,
                       native: int | None) -> None:
        state = "done"
        if kind == "helper" and native is not None:  # never handed over: roll it back
            self.ctl.cancel(native)
            state = "rolled back"
        elif mine.finished or mine.slurm_id is None:
            state = "moot"
        elif kind == "cancel":
            self.ctl.cancel(mine.slurm_id)
        elif kind == "handover":  # the helper's nodes were given: let the job take them up
            self.ctl.update_nodes(mine.slurm_id, "ALL")
            state = "finished"
        logger.info("%s: %s intent for %s after the restart: %s", self.name, kind,
                    mine.spec.id, state)
        if self.journal is not None and token is not None:
            self.journal.intent_end(token, state, detail="after a restart")

    def resume_intent(self, token: int, kind: str, job_id: str, native_id: int | None) -> None:
        """An intent journaled before a restart and never closed: finish it at the next
        poll (``submit``: adopt Slurm's copy or give the job back; ``cancel``: cancel the
        job; ``helper``: cancel that helper allocation; ``handover``: have the job take up
        the nodes handed to it)."""
        mine = self._mine.get(job_id)
        if kind == "submit" and mine is not None and not mine.finished:
            if mine.slurm_id is None:
                mine.submit_token = token
            elif self.journal is not None:
                self.journal.intent_end(token, "adopted", mine.slurm_id, "known after a restart")
            return
        if mine is None or (kind == "submit" and mine.finished):
            if kind == "helper" and native_id is not None:
                mine = _Mine(JobSpec(job_id, JobKind.RIGID, 1, 1, 1), None, 0, 0.0,
                             finished=True)
                self._finish_intent(mine, token, kind, native_id)
            elif self.journal is not None:
                self.journal.intent_end(token, "moot", detail="the job is no longer followed")
            return
        mine.todo.append((token, kind, native_id))

    def _follow_all(self, poll: Poll, now: float) -> None:
        by_id = {j.job_id: j for j in poll.jobs}
        missing: list[_Mine] = []
        for mine in self._mine.values():
            if mine.finished:
                continue
            job = by_id.get(mine.slurm_id) if mine.slurm_id is not None else None
            if job is None:
                missing.append(mine)
            else:
                self._follow(mine, job, now)
        if missing:
            self._settle_missing(missing, now)

    def _follow(self, mine: _Mine, job: SlurmJob, now: float) -> None:
        state = job.state
        if state is JobState.UNKNOWN:
            logger.warning("%s: job %s is in state %r, which the adapter does not know",
                           self.name, job.job_id, job.state_raw)
            return
        if not mine.started and _ran(job):
            start = self._clamp(job.start_time, mine.submitted, now)
            self._emit(mine, JobEvent(start, mine.spec.id, JobState.RUNNING, job.nodes))
            mine.started, mine.size = True, job.nodes
        elif (mine.started and job.state_raw.startswith("RUNNING") and job.nodes > 0
              and job.nodes != mine.size and self._quiet(mine.spec.id)):
            logger.info("%s: job %s now has %d nodes (was %d), changed outside the manager",
                        self.name, mine.spec.id, job.nodes, mine.size)
            self._emit(mine, JobEvent(now, mine.spec.id, JobState.RUNNING, job.nodes))
            mine.size = job.nodes
        if state.finished:
            self._end(mine, job, state, now)

    def _end(self, mine: _Mine, job: SlurmJob, state: JobState, now: float) -> None:
        end = self._clamp(job.end_time, max(mine.submitted, mine.changed), now)
        reason = "" if state is JobState.COMPLETED else f"{job.state_raw} {job.reason}".strip()
        retriable = job.state_raw.split(" ")[0] in _NOT_ITS_FAULT
        self._emit(mine, JobEvent(end, mine.spec.id, state, 0, reason, retriable))
        mine.finished = True
        mine.size = 0

    def _settle_missing(self, missing: list[_Mine], now: float) -> None:
        """Jobs gone from squeue: their end from accounting, or FAILED if it has none.

        A job whose submission was never confirmed (no Slurm id) is looked up in
        accounting by its name (which holds the run's tag); if Slurm never had it, it
        goes back to the manager's queue (a WAITING event) rather than failing.
        """
        ids = [m.slurm_id for m in missing if m.slurm_id is not None]
        unbound = {meta.job_name(m.spec.id, self.run_id): m for m in missing
                   if m.slurm_id is None}
        try:
            found = {j.job_id: j for j in self.ctl.accounting(ids)}
            named = self.ctl.accounting_named(sorted(unbound)) if unbound else []
        except ExternalError as exc:
            logger.warning("%s: sacct failed (%s); will retry next cycle", self.name, exc)
            return
        for row in sorted(named, key=lambda j: (j.state is not JobState.COMPLETED, j.job_id)):
            taken = unbound.get(row.name)
            if taken is not None and taken.slurm_id is None and row.state.finished:
                self._bound(taken, row.job_id)
                found[row.job_id] = row
        for taken in unbound.values():
            if taken.slurm_id is None:
                self._given_back(taken, now)
        for mine in missing:
            job = found.get(mine.slurm_id) if mine.slurm_id is not None else None
            if job is not None and job.state.finished:
                if not mine.started and _ran(job):
                    start = self._clamp(job.start_time, mine.submitted, now)
                    self._emit(mine, JobEvent(start, mine.spec.id, JobState.RUNNING, job.nodes))
                    mine.started = True
                self._end(mine, job, job.state, now)
            elif job is None and mine.slurm_id is not None:
                self._emit(mine, JobEvent(now, mine.spec.id, JobState.FAILED, 0,
                                          f"job {mine.slurm_id} is neither in the queue nor "
                                          "in accounting"))
                mine.finished = True

    def _given_back(self, mine: _Mine, now: float) -> None:
        """Slurm never had this submission (the manager stopped before sbatch ran)."""
        reason = "its submission never reached Slurm: back to the queue"
        logger.warning("%s: %s: %s", self.name, mine.spec.id, reason)
        if self.journal is not None and mine.submit_token is not None:
            self.journal.intent_end(mine.submit_token, "rolled back", detail=reason)
        for token, _, _ in mine.todo:
            if self.journal is not None and token is not None:
                self.journal.intent_end(token, "moot", detail=reason)
        self._events.append(JobEvent(now, mine.spec.id, JobState.WAITING, 0, reason))
        del self._mine[mine.spec.id]

    def _began(self) -> None:
        """A poll begins (for :meth:`_quiet`)."""
        if self.negotiations is not None:
            self._poll_began = self.negotiations.clock()

    def _quiet(self, job_id: str) -> bool:
        """Whether the latest poll shows the job's size as it is: no negotiation of it in
        flight, or ended since the poll began (its answer says the size)."""
        return self.negotiations is None or self.negotiations.quiet_since(job_id,
                                                                          self._poll_began)

    def _emit(self, mine: _Mine, event: JobEvent) -> None:
        mine.changed = max(mine.changed, event.time)
        self._events.append(event)

    def _sweep(self, poll: Poll) -> None:
        """Every poll: cancel what this run left in the queue and no longer follows.

        * Helper allocations: a helper of this run is a stray when its job no longer
          runs or no expansion in flight in this process holds it (left by a crash in the
          middle of an expansion, or by a hand-over Slurm failed). It is cancelled at
          every poll, :data:`HELPER_CANCELS` times at most, until a poll confirms it left
          the queue (:attr:`stray_helpers`). One COMPLETING cannot be cancelled (Slurm
          keeps it with no nodes after a failed hand-over); it is reported once.
        * Extra copies of a workload job: a job of this run that this site does not
          follow, or a second Slurm job for one it follows (a crash between ``sbatch``
          and the journal made the restart submit it again): it would run unseen as
          background load.
        * Jobs the manager let go of (:meth:`abandon`): it recorded them failed when it
          gave this site up; found again, they are cancelled.
        """
        running = {j.job_id for j in poll.jobs if j.state_raw.split(" ")[0] == "RUNNING"}
        queued: set[int] = set()
        with self._expanding_lock:
            expanding = set(self._expanding)
        for job in poll.jobs:
            tag = meta.decode(job.comment)
            if tag is None or tag.run != self.run_id or job.state.finished:
                continue
            if tag.helper_for is not None:
                queued.add(job.job_id)
                if ((job.job_id not in expanding and self._parent_quiet(tag.helper_for))
                        or tag.helper_for not in running):
                    self._stray_helper(job, tag.helper_for)
            elif tag.job is not None and self._abandoned(tag.job):
                logger.warning("%s: cancelling Slurm job %d of %s: the run recorded it failed "
                               "when it gave the site up", self.name, job.job_id, tag.job)
                self.ctl.cancel(job.job_id)
            elif tag.job is not None and self._extra_copy(tag.job, job.job_id):
                logger.warning("%s: cancelling Slurm job %d, an extra copy of %s that this "
                               "run does not follow", self.name, job.job_id, tag.job)
                self.ctl.cancel(job.job_id)
        self._helpers_gone(queued)

    def _parent_quiet(self, parent: int) -> bool:
        """No expansion of the helper's job in flight (nor ended since the poll began: its
        helper is being granted or was just handed over, not a stray)."""
        return self._quiet(self._by_slurm.get(parent, ""))

    def _abandoned(self, job_id: str) -> bool:
        mine = self._mine.get(job_id)
        return mine is not None and mine.abandoned

    def abandon(self, job_ids: Iterable[str]) -> None:
        """Let go of jobs the manager recorded failed (this site was given up): they are
        no longer followed (no events), and each poll that answers cancels what of them
        the site still has (:meth:`_sweep`). Marked, not removed: a poll may be running
        in another thread."""
        for job_id in job_ids:
            mine = self._mine.get(job_id)
            if mine is not None:
                mine.abandoned, mine.finished = True, True
        self._stale()

    def _extra_copy(self, job_id: str, slurm_id: int) -> bool:
        mine = self._mine.get(job_id)
        if mine is None:
            return True
        return mine.slurm_id is not None and mine.slurm_id != slurm_id

    def _stray_helper(self, job: SlurmJob, parent: int) -> None:
        """Cancel a stray helper, once per poll and :data:`HELPER_CANCELS` times at most;
        a helper COMPLETING is a ghost Slurm keeps (no nodes, cannot be cancelled):
        reported once."""
        entry = self.stray_helpers.setdefault(job.job_id, {
            "helper": job.job_id, "parent": parent, "cancels": 0, "outcome": "cancelling"})
        if job.completing:
            if entry["outcome"] != "completing":
                entry["outcome"] = "completing"
                logger.warning("%s: helper allocation %d (for job %d) is COMPLETING in Slurm "
                               "with no nodes and cannot be cancelled; a Slurm administrator's "
                               "`scontrol reconfigure` clears it", self.name, job.job_id,
                               parent)
            return
        cancels = int(str(entry["cancels"]))
        if cancels >= HELPER_CANCELS:
            if entry["outcome"] != "stuck":
                entry["outcome"] = "stuck"
                logger.error("%s: helper allocation %d (for job %d) is still %s after %d "
                             "cancels; left alone", self.name, job.job_id, parent,
                             job.state_raw, cancels)
            return
        entry["cancels"], entry["outcome"] = cancels + 1, "cancelling"
        logger.warning("%s: cancelling stray helper allocation %d (its job %d %s)", self.name,
                       job.job_id, parent, "no longer runs" if cancels == 0 else "again")
        result = self.ctl.cancel(job.job_id)
        if result.rc != 0:
            logger.warning("%s: scancel %d: %s", self.name, job.job_id,
                           result.stderr.strip() or f"exit {result.rc}")

    def _helpers_gone(self, queued: set[int]) -> None:
        """Stray helpers no longer in the queue (or ended): their cancel is confirmed."""
        for helper, entry in self.stray_helpers.items():
            if helper not in queued and entry["outcome"] != "gone":
                entry["outcome"] = "gone"
                logger.info("%s: stray helper allocation %d has left the queue", self.name,
                            helper)

    # ------------------------------------------------------------ dead nodes

    def _shed_dead(self, poll: Poll) -> bool:
        """Shrink away the dead nodes of every running managed job that can do without
        them (each dead node once per job); the others are left to Slurm (``NODE_FAIL``,
        then the manager's retry). Whether any job was looked at."""
        by_id = {j.job_id: j for j in poll.jobs}
        acted = False
        for mine in list(self._mine.values()):
            job = by_id.get(mine.slurm_id) if mine.slurm_id is not None else None
            if (job is None or mine.finished or not mine.started
                    or job.state_raw.split(" ")[0] != "RUNNING" or not self._quiet(mine.spec.id)):
                continue
            lost = sorted(set(_nodes_of(job)) & self.dead_nodes)
            if lost and not {(job.job_id, n) for n in lost} <= self._lost:
                self._lost.update((job.job_id, n) for n in lost)
                self._shed(mine, job, lost)
                acted = True
        return acted

    def _shed(self, mine: _Mine, job: SlurmJob, lost: list[str]) -> None:
        entry: dict[str, object] = {"job": mine.spec.id, "slurm_id": job.job_id,
                                    "nodes": job.nodes, "dead": ",".join(lost)}
        why = self._unsaveable(mine, job, lost)
        if why:
            entry.update(action="none", reason=why)
            logger.warning("%s: %s (Slurm job %d) lost %s: %s", self.name, mine.spec.id,
                           job.job_id, entry["dead"], why)
        else:
            target = mine.size - mine.spec.releases(mine.size, len(lost))
            result = self._resize(mine, target)
            entry.update(action="shed", outcome=result.outcome.value, after=result.after,
                         reason=result.reason)
            logger.warning("%s: %s (Slurm job %d) lost %s: shed, %s", self.name,
                           mine.spec.id, job.job_id, entry["dead"], result.describe())
        self.node_failures.append(entry)
        if self.journal is not None:
            self.journal.node_failure(self.name, entry)

    def restore_node_failures(self, entries: Sequence[Mapping[str, object]]) -> None:
        """Take up the node failures journaled before a restart: reported again in the
        summary, and each (job, dead node) already dealt with is not shed a second time."""
        for entry in entries:
            self.node_failures.append(dict(entry))
            slurm_id = entry.get("slurm_id")
            if isinstance(slurm_id, int):
                self._lost.update((slurm_id, node) for node in
                                  str(entry.get("dead", "")).split(",") if node)

    def _unsaveable(self, mine: _Mine, job: SlurmJob, lost: list[str]) -> str:
        """Why the job cannot shed ``lost`` ("" if it can)."""
        why = "" if self.hooks is None else self.hooks.unsaveable(mine.spec.id)
        if why:
            return why
        if job.batch_host in lost:
            return "its batch host is dead: Slurm ends it NODE_FAIL"
        if not mine.spec.malleable or Capability.SHRINK not in self.capabilities:
            return "it cannot shrink: Slurm ends it NODE_FAIL"
        if mine.spec.releases(mine.size, len(lost)) < len(lost):
            return (f"it cannot run on fewer than {mine.size - len(lost) + 1} nodes: Slurm "
                    "ends it NODE_FAIL")
        return ""

    # ------------------------------------------------------------ acting

    def start(self, spec: JobSpec, size: int) -> int:
        if size < 1:
            return 0
        tag = meta.encode(meta.Tag(self.run_id, job=spec.id))
        options = [f"--job-name={meta.job_name(spec.id, self.run_id)}", f"--comment={tag}",
                   f"--nodes={size}", "--exclusive", "--no-requeue",
                   f"--time={self.payload.time_limit_minutes(spec)}", f"--output={self.output}"]
        token = self._intent("submit", spec.id, size)
        faults.reached("submit.before")
        try:
            slurm_id = self.ctl.submit(options, self.payload.script(spec))
        except CommandTimeout as exc:  # it may have been submitted: the next poll tells
            logger.warning("%s: sbatch of %s did not answer (%s); the next poll adopts it "
                           "if Slurm has it", self.name, spec.id, exc)
            self._stale()
            self.adopt(spec, None, requested=size)
            self._mine[spec.id].submit_token = token
            return size
        except (ExternalError, ValueError) as exc:
            logger.warning("%s: sbatch of %s refused: %s", self.name, spec.id, exc)
            self._intent_end(token, "failed", detail=str(exc))
            return 0
        faults.reached("submit.after")
        self._stale()
        self.adopt(spec, slurm_id, requested=size)
        if self.journal is not None:
            self.journal.slurm_submitted(self.name, spec.id, slurm_id)
        self._intent_end(token, "done", slurm_id)
        faults.reached("submit.done")
        logger.info("%s: submitted %s as Slurm job %d on %d nodes", self.name, spec.id,
                    slurm_id, size)
        return size

    def adopt(self, spec: JobSpec, slurm_id: int | None, *, requested: int = 0,
              started: bool = False, size: int = 0, since: float | None = None) -> None:
        """Take charge of a job (just submitted, or found again after a restart)."""
        now = self.clock.now() if since is None else since
        self._mine[spec.id] = _Mine(spec, slurm_id, requested or size, now, size, started,
                                    changed=now)
        if slurm_id is not None:
            self._by_slurm[slurm_id] = spec.id

    def size_of(self, job_id: str) -> int | None:
        """The size this site last knew of a running job it follows (None: not running)."""
        mine = self._mine.get(job_id)
        if mine is None or not mine.started or mine.finished:
            return None
        return mine.size

    def resizable(self, job_id: str) -> JobSpec | None:
        """The spec of a job that may be resized now (None: not followed, not running and
        malleable, or a negotiation of it in flight); its size is :meth:`size_of`."""
        mine = self._resizable(job_id)
        return None if mine is None else mine.spec

    def resized(self, job_id: str, size: int) -> None:
        """Someone else (an MPI job's runner) resized a running job to ``size`` nodes: it
        is its size from now on (a job event says so)."""
        mine = self._mine.get(job_id)
        if mine is None or mine.finished or size == mine.size:
            return
        self._emit(mine, JobEvent(self.clock.now(), job_id, JobState.RUNNING, size))
        mine.size = size

    def forget(self, job_ids: Iterable[str]) -> None:
        """Stop keeping finished jobs: their state here and their node failures (the
        journal keeps every failure)."""
        gone: set[int] = set()
        for job_id in job_ids:
            mine = self._mine.get(job_id)
            if mine is not None and mine.finished:
                del self._mine[job_id]
                if mine.slurm_id is not None:
                    self._by_slurm.pop(mine.slurm_id, None)
                    gone.add(mine.slurm_id)
        if gone:
            self._lost = {pair for pair in self._lost if pair[0] not in gone}
            self.node_failures = [e for e in self.node_failures if e.get("slurm_id") not in gone]

    def slurm_id(self, job_id: str) -> int | None:
        mine = self._mine.get(job_id)
        return None if mine is None else mine.slurm_id

    def native_id(self, job_id: str) -> int | None:
        """The site's id of a job this adapter submitted (as every kind names it)."""
        return self.slurm_id(job_id)

    def offer_grow(self, job_id: str, offer: int) -> int:
        mine = self._resizable(job_id)
        if mine is None or offer <= 0 or Capability.EXPAND not in self.capabilities:
            return 0
        accepted = mine.spec.accepts(mine.size, offer)
        if accepted <= 0:
            return 0
        target = mine.size + accepted
        if self.negotiations is not None and self.pending_expansions:
            return self._pending(mine, "grow", accepted,
                                 lambda: self._resize(mine, target, answer="grow"))
        return max(0, self._resize(mine, target).changed)

    def request_shrink(self, job_id: str, amount: int, mandatory: bool) -> int:
        mine = self._resizable(job_id)
        if mine is None or amount <= 0 or Capability.SHRINK not in self.capabilities:
            return 0
        released = mine.spec.releases(mine.size, amount)
        if released <= 0:
            return 0
        return max(0, -self._resize(mine, mine.size - released).changed)

    def cancel(self, job_id: str) -> None:
        mine = self._mine.get(job_id)
        if mine is None or mine.finished:
            return
        token = self._intent("cancel", job_id, 0, mine.slurm_id)
        faults.reached("cancel.before")
        if mine.slurm_id is None:  # not bound yet: cancelled once found
            mine.todo.append((token, "cancel", None))
            return
        self._stale()
        self.ctl.cancel(mine.slurm_id)
        faults.reached("cancel.after")
        self._intent_end(token, "done")

    def _intent(self, kind: str, job_id: str, amount: int, native: int | None = None
                ) -> int | None:
        if self.journal is None:
            return None
        return self.journal.intent(kind, self.name, job_id, amount, native, self.clock.now())

    def _intent_end(self, token: int | None, state: str, native: int | None = None,
                    detail: str = "") -> None:
        if self.journal is not None and token is not None:
            self.journal.intent_end(token, state, native, detail)

    def _resizable(self, job_id: str) -> _Mine | None:
        mine = self._mine.get(job_id)
        if (mine is None or mine.slurm_id is None or not mine.started or mine.finished
                or not mine.spec.malleable
                or (self.negotiations is not None and job_id in self.negotiations)):
            return None
        return mine

    def negotiate(self, job_id: str, kind: str, amount: int,
                  work: Callable[[], tuple[int, str]]) -> int:
        """Run a slow resize of a job this site follows as a pending negotiation (the MPI
        runner's: the program's answer over its channel). ``work`` returns the job's size
        after it (nodes) and, when it did not change as asked, why; it is answered as a
        job event. PENDING, or 0 when none can begin (no :attr:`negotiations`, the job
        not followed or not running, one in flight, no worker free)."""
        mine = self._resizable(job_id)
        if mine is None or self.negotiations is None or amount <= 0:
            return 0

        def run() -> None:
            after, reason = work()
            self._answer(mine, kind, after, reason)

        return self._pending(mine, kind, amount, run)

    def _pending(self, mine: _Mine, kind: str, amount: int, work: Callable[[], object]) -> int:
        """Run ``work`` (which ends with :meth:`_answer`) in a worker: PENDING, or 0 when
        no worker is free."""
        assert self.negotiations is not None  # the caller checked

        def fail(reason: str) -> None:
            self._answer(mine, kind, mine.size, reason)

        if not self.negotiations.begin(mine.spec.id, kind, amount, work, fail):
            logger.info("%s: no worker free for the %s of %s: refused for now", self.name,
                        kind, mine.spec.id)
            return 0
        self._stale()
        return PENDING

    def _answer(self, mine: _Mine, kind: str, after: int, reason: str = "") -> None:
        """The answer of a pending grow or shrink: the job's size is now ``after``."""
        if mine.finished:  # it ended meanwhile: its end event says so
            return
        before = mine.size
        amount = max(0, after - before if kind == "grow" else before - after)
        if after > 0:
            mine.size = after
        self._emit(mine, JobEvent(self.clock.now(), mine.spec.id, JobState.RUNNING, mine.size,
                                  "" if amount else reason, answer=kind, amount=amount))
        self._stale()

    def _resize(self, mine: _Mine, target: int, answer: str = "") -> ResizeResult:
        """Resize and journal it; emit the new size (as the answer of a pending ``grow``
        or ``shrink`` when ``answer`` says which)."""
        assert mine.slurm_id is not None and self.resizer is not None  # _resizable checked
        token = None
        self._stale()
        if self.journal is not None:
            token = self.journal.resize_begin(self.name, mine.spec.id, mine.slurm_id,
                                              mine.size, target)
        shrink = target < mine.size
        if shrink:
            faults.reached("shrink.before")
        steps: list[int | None] = []
        helpers: list[int] = []

        def on_step(step: str, helper: int) -> None:
            helpers.append(helper)
            steps.append(self._expand_step(mine, step, helper))

        try:
            result = self.resizer.resize(mine.slurm_id, target, self.dead_nodes, on_step)
        except (ResizeError, ExternalError) as exc:
            result = ResizeResult(mine.slurm_id, mine.size, target, mine.size, Outcome.REFUSED,
                                  str(exc))
        finally:
            with self._expanding_lock:  # this expansion is over: its helper, if left, is a stray
                self._expanding.difference_update(helpers)
        if shrink:
            faults.reached("shrink.after")
        for step_token in steps:
            self._intent_end(step_token, "done", detail=result.outcome.value)
        if self.journal is not None and token is not None:
            self.journal.resize_end(token, result)
        self.resizes.append(result)
        if result.outcome is not Outcome.DONE:
            logger.warning("%s: %s", self.name, result.describe())
        if answer:
            self._answer(mine, answer, result.after, result.reason or result.outcome.value)
        elif result.after > 0 and result.after != mine.size:
            self._emit(mine, JobEvent(self.clock.now(), mine.spec.id, JobState.RUNNING,
                                      result.after))
            mine.size = result.after
        return result


    def _expand_step(self, mine: _Mine, step: str, helper: int) -> int | None:
        """Journal a step of an expansion (the helper granted, its hand-over begun)."""
        with self._expanding_lock:
            self._expanding.add(helper)  # not a stray while its expansion runs
        if step == "helper":
            if self.negotiations is not None:  # its nodes are held now: not idle in sinfo
                self.negotiations.acquired(mine.spec.id)
            token = self._intent("helper", mine.spec.id, mine.slurm_id or 0, helper)
            faults.reached("helper.granted")
            return token
        if step == "handover":
            token = self._intent("handover", mine.spec.id, mine.slurm_id or 0, helper)
            faults.reached("handover.before")
            return token
        faults.reached("handover.given" if step == "given" else "handover.after")
        return None


HELPER_CANCELS = 3
"""How many times (once per poll) a stray helper allocation is cancelled before it is left
alone and reported ``stuck``."""

_NOT_ITS_FAULT = frozenset({"NODE_FAIL", "BOOT_FAIL"})
"""Slurm end states that say nothing about the job itself: it may run again."""


def _nodes_of(job: SlurmJob) -> list[str]:
    try:
        return hostlist.expand(job.node_list)
    except hostlist.HostlistError:
        logger.warning("job %d: cannot read its node list %r", job.job_id, job.node_list)
        return []


def _ran(job: SlurmJob) -> bool:
    """Whether a job got nodes at some point (running now, or finished after running).

    squeue keeps a finished job's node list; sacct has none, but a job that ran has a
    start before its end (a job cancelled while pending has neither nodes nor a run).
    """
    if job.state is JobState.RUNNING:
        return job.nodes > 0
    if not job.state.finished or job.start_time is None or job.nodes < 1:
        return False
    return bool(job.node_list) or (job.end_time is not None and job.end_time > job.start_time)
