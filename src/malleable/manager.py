"""The malleability manager's control loop: observe -> decide -> act -> record.

The same :class:`Manager` runs in the simulator and against real clusters; only the
clock that calls :meth:`Manager.cycle` and the :class:`ResourceManager` adapters
differ. A cycle:

1. drains each adapter's job events (starts, resizes, ends) into the job records;
2. takes one view of every cluster and of the placement queue;
3. runs the policy, answering each action it yields through the adapters;
4. applies the queue bookkeeping (placed jobs leave the queue, failed tries count)
   once the policy is done, so the view never changes under the policy.

Each site is observed and acted on behind its own error boundary: a site that fails
(:class:`~malleable.errors.ExternalError`) is shown offline in the view and backed off
(:mod:`malleable.health`); the other sites go on in the same cycle.

An adapter may answer a grow offer or a shrink request :data:`~malleable.resources.PENDING`
(a Slurm expansion, an MPI program's answer): for a grow the policy hears the nodes the job
would take (claimed while it is in flight, so not offered to anyone else in the cycle), for
a shrink 0 (nothing is free before the answer); the job is left alone (no other grow or
shrink is sent to it) until the answer arrives as a job event, and the ``grow``/``shrink``
operation is recorded then, with what the job took or gave (nothing for a refusal), so
``jobs.csv`` and the journal keep "accepted" semantics.

Whatever the policy, the applications' own grow requests are then granted from the
nodes it left free (:mod:`malleable.policies.requests`, voluntary as in KOALA), on
every cluster set where requests can come from: some adapter reports the
applications' feedback (:attr:`Capability.FEEDBACK`, the MPI runner's sites). The
simulated clusters report none, so simulations run the policy alone, at full speed.
"""

from __future__ import annotations

import logging
from collections.abc import Generator, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import GeneratorType, MappingProxyType
from typing import Protocol

from malleable.errors import ExternalError, MalleableError
from malleable.health import SiteHealth
from malleable.metrics.records import JobRecord
from malleable.model import (
    Action,
    Cancel,
    ClusterView,
    Defer,
    Grow,
    JobSpec,
    JobState,
    Operation,
    Place,
    Reject,
    Shrink,
    View,
    WaitingJob,
)
from malleable.policies.base import Policy, Steps, negotiate
from malleable.policies.requests import honour_requests
from malleable.resources import PENDING, Abandoning, Capability, JobEvent, ResourceManager

logger = logging.getLogger(__name__)


class Journal(Protocol):
    """Where the manager makes its bookkeeping durable (SQLite for real runs)."""

    def job_submitted(self, spec: JobSpec) -> None: ...

    def operation(self, op: Operation) -> None: ...

    def job_event(self, event: JobEvent) -> None: ...


class _QueueView(Sequence[WaitingJob]):
    """A read-only window on the manager's queue, valid while a policy decides."""

    __slots__ = ("_queue",)

    def __init__(self, queue: dict[str, WaitingJob]) -> None:
        self._queue = queue

    def __len__(self) -> int:
        return len(self._queue)

    def __iter__(self) -> Iterator[WaitingJob]:
        return iter(self._queue.values())

    def __getitem__(self, index: int) -> WaitingJob:  # type: ignore[override]
        if index == 0 and self._queue:
            return next(iter(self._queue.values()))
        return list(self._queue.values())[index]


@dataclass
class Manager:
    """Places jobs and grows or shrinks them through a policy, over several clusters.

    ``max_tries`` is KOALA's placement-failure threshold: a job that failed to be
    placed that many times leaves the queue as FAILED (None: never). ``max_retries`` is
    how many times a job that failed through no fault of its own (a ``retriable``
    event: a node failed under it) goes back to the queue to run again (0 in
    simulations: nothing fails there).
    """

    policy: Policy
    clusters: Mapping[str, ResourceManager]
    max_tries: int | None = None
    journal: Journal | None = None
    records: dict[str, JobRecord] = field(default_factory=dict)
    operations: list[Operation] = field(default_factory=list)
    _queue: dict[str, WaitingJob] = field(default_factory=dict)
    _where: dict[str, str] = field(default_factory=dict)
    _active: set[str] = field(default_factory=set)
    _queue_view: _QueueView = field(init=False)
    last_view: View | None = field(init=False)
    """The view the policy decided on in the last cycle."""
    max_retries: int = 0
    retries: dict[str, int] = field(default_factory=dict)
    """Times each job was put back in the queue after a failure not its own."""
    health: dict[str, SiteHealth] = field(default_factory=dict)
    """Per-site health, filled at a site's first failure or by the real-time driver (a
    run whose sites never fail, a simulation, takes the plain path)."""
    in_flight: dict[str, str] = field(default_factory=dict)
    """Jobs whose grow or shrink an adapter answered PENDING: ``grow`` or ``shrink``."""
    _sites: dict[str, ResourceManager] = field(init=False)
    """``clusters`` as a dict, which a compiled manager reads and walks directly (a
    ``Mapping`` it reaches through Python's generic calls: about 3% of a FIFO run).
    ``clusters`` is not changed once the manager is made; :meth:`add_site` and
    :meth:`remove_site` change both (``clusters`` then becomes the manager's own dict)."""

    def __post_init__(self) -> None:
        self._queue_view = _QueueView(self._queue)
        self.last_view = None
        self._sites = dict(self.clusters)
        if any(Capability.FEEDBACK in rm.capabilities for rm in self._sites.values()):
            self.policy = honour_requests(self.policy)  # applications' own grow requests

    # -------------------------------------------------------------- submissions

    def submit(self, spec: JobSpec) -> None:
        """Put a job in the placement queue."""
        if spec.id in self.records:
            raise MalleableError(f"job {spec.id} was already submitted")
        self._queue[spec.id] = WaitingJob(spec)
        self.records[spec.id] = JobRecord(spec)
        self._active.add(spec.id)
        if self.journal is not None:
            self.journal.job_submitted(spec)

    @property
    def waiting(self) -> int:
        return len(self._queue)

    def waiting_ids(self) -> list[str]:
        """The ids of the jobs in the placement queue, in queue order."""
        return list(self._queue)

    def take_placed(self, job_id: str, cluster: str, size: int, now: float) -> bool:
        """A waiting job found running on ``cluster`` without a placement by the policy
        (its user released it): it leaves the queue and is followed there."""
        if job_id not in self._queue:
            return False
        del self._queue[job_id]
        self._where[job_id] = cluster
        self.records[job_id].place(now, cluster)
        self._log(Operation(now, "place", job_id, cluster, size))
        return True

    def forget(self, job_ids: Iterable[str]) -> None:
        """Drop the records of finished jobs (a long-running service keeps memory flat)."""
        for job_id in job_ids:
            record = self.records.get(job_id)
            if record is not None and record.state.finished:
                del self.records[job_id]
                self._where.pop(job_id, None)
                self.retries.pop(job_id, None)

    def withdraw(self, job_id: str, now: float, reason: str) -> bool:
        """Take a waiting job out of the queue as CANCELLED (its user cancelled it
        before it was placed); False if it was not waiting."""
        if job_id not in self._queue:
            return False
        del self._queue[job_id]
        self.records[job_id].finish(now, JobState.CANCELLED, reason)
        self._active.discard(job_id)
        self._log(Operation(now, "cancel", job_id, "", 0))
        return True

    @property
    def unfinished(self) -> int:
        """Jobs submitted and not finished yet (waiting or running)."""
        return len(self._active)

    def cluster_of(self, job_id: str) -> str | None:
        return self._where.get(job_id)

    def restore(self, records: Iterable[JobRecord], where: Mapping[str, str],
                operations: Iterable[Operation] = ()) -> None:
        """Take up state a journal saved before a restart (records in submission order).

        Unfinished jobs placed on a cluster (``where``) are followed there; unfinished
        jobs not placed go back to the queue, with their failed tries forgotten. The
        retries already spent (``retry`` operations) count against ``max_retries``.
        """
        for record in records:
            job_id = record.spec.id
            self.records[job_id] = record
            if job_id in where:
                self._where[job_id] = where[job_id]
            if record.state.finished:
                continue
            self._active.add(job_id)
            if job_id not in where:
                self._queue[job_id] = WaitingJob(record.spec)
        for op in operations:
            self.operations.append(op)
            if op.kind == "retry":
                self.retries[op.job_id] = max(self.retries.get(op.job_id, 0), op.amount)

    # -------------------------------------------------------------- the cycle

    def cycle(self, now: float) -> int:
        """One observe -> decide -> act pass; returns how many actions were applied."""
        view = View(now, self._observe(), self._queue_view)
        self.last_view = view
        placed: list[str] = []
        deferred: list[str] = []
        applied = 0
        decision = self.policy.decide(view, now)
        steps = _then_end(decision if type(decision) is GeneratorType else negotiate(decision))
        send = steps.send
        action = send(None)
        while action is not _END:  # next_action inlined: two actions a job pass here
            try:
                if self.health and not self._reachable(action):
                    answer = _nothing(action)
                elif type(action) is Place:  # the hot cases without _apply's frame
                    answer = self._place(action.job_id, action.cluster, action.size, now,
                                         placed)
                elif type(action) is Defer:
                    deferred.append(action.job_id)
                    answer = None
                else:
                    answer = self._apply(action, now, placed, deferred)
            except ExternalError as exc:  # that site only: the policy hears "nothing"
                answer = self._action_failed(action, exc)
            applied += 1
            action = send(answer)
        next(steps, None)  # ends it: left suspended, it would be closed by an exception
        if placed or deferred:
            self._settle_queue(placed, deferred, now)
        return applied

    # -------------------------------------------------------------- the service's API
    # What a long-running service (malleable.site) asks of the manager, so that it never
    # reaches into its fields; none of it runs in a simulation's cycle.

    def record(self, job_id: str) -> JobRecord | None:
        """The record of a job (None if unknown or forgotten)."""
        return self.records.get(job_id)

    def job_records(self) -> Mapping[str, JobRecord]:
        """Every job's record by id, in submission order (a read-only view)."""
        return MappingProxyType(self.records)

    def health_of(self, name: str) -> SiteHealth | None:
        """The health record of a site, if it has one yet (not created here)."""
        return self.health.get(name)

    def set_policy(self, policy: Policy) -> None:
        """Decide with ``policy`` from the next cycle on (wrapped as at construction when
        a site reports the applications' own requests)."""
        if any(Capability.FEEDBACK in rm.capabilities for rm in self._sites.values()):
            policy = honour_requests(policy)
        self.policy = policy

    def sites(self) -> list[str]:
        """The names of the sites the manager observes and places on."""
        return list(self._sites)

    def jobs_on(self, name: str) -> list[str]:
        """The unfinished jobs placed on a site."""
        return [j for j, site in self._where.items() if site == name and j in self._active]

    def add_site(self, name: str, rm: ResourceManager, health: SiteHealth | None = None) -> None:
        """Observe and place on a new site from the next cycle on (``health``: its record,
        e.g. with a real-time driver's back-off; a fresh one when the manager keeps some)."""
        if name in self._sites:
            raise MalleableError(f"site {name} is already managed")
        self._sites[name] = rm
        self.clusters = dict(self._sites)
        if health is not None or self.health:
            self.health[name] = health or SiteHealth(name)

    def remove_site(self, name: str) -> ResourceManager:
        """Stop observing a site and placing on it; its adapter (the caller closes it).
        MalleableError while unfinished jobs are placed there (see :meth:`jobs_on`)."""
        if name not in self._sites:
            raise MalleableError(f"site {name} is not managed")
        busy = self.jobs_on(name)
        if busy:
            raise MalleableError(f"site {name} still runs {len(busy)} managed job(s)")
        rm = self._sites.pop(name)
        self.clusters = dict(self._sites)
        self.health.pop(name, None)
        return rm

    def trim_operations(self, keep: int, above: int | None = None) -> None:
        """Forget all but the ``keep`` most recent operations once there are more than
        ``above`` (default ``keep``); the journal has them all."""
        if len(self.operations) > (keep if above is None else above):
            del self.operations[:len(self.operations) - max(0, keep)]

    def site_health(self, name: str) -> SiteHealth:
        """The health record of a site (created on first use)."""
        health = self.health.get(name)
        if health is None:
            health = self.health[name] = SiteHealth(name)
        return health

    def _observe(self) -> dict[str, ClusterView]:
        """Drain every site's events and take its view; a failing site shows offline."""
        if not self.health:
            try:
                sites = self._sites
                for rm in sites.values():
                    for event in rm.drain_events():
                        self.on_event(event)
                views = {}
                for name, rm in sites.items():  # not a comprehension: no frame a cycle
                    views[name] = rm.observe()
                return views
            except ExternalError as exc:
                logger.debug("a site failed (%s): observing site by site", exc)
        views = {}
        for name, rm in self._sites.items():
            if self._given_up(name):
                self.health[name].counted(False)  # out of the view: a cycle it is missed
            else:
                views[name] = self._observe_site(name, rm)
        return views

    def _given_up(self, name: str) -> bool:
        health = self.health.get(name)
        return health is not None and health.given_up

    def _observe_site(self, name: str, rm: ResourceManager) -> ClusterView:
        health = self.site_health(name)
        view = None
        if health.usable():
            try:
                for event in rm.drain_events():
                    self.on_event(event)
                view = rm.observe()
                health.succeeded()
            except ExternalError as exc:
                health.failed(str(exc))
        health.counted(view is not None)
        return view if view is not None else self._offline_view(name)

    def give_up_site(self, name: str, now: float) -> list[str]:
        """Stop using a site that has been unavailable for too long: it leaves the view
        (policies neither place there nor count its nodes) and its unfinished jobs are
        recorded FAILED with the reason, so the run can end; its adapter drops them (and
        cancels them there if the site answers again). The job ids."""
        health = self.site_health(name)
        if not health.given_up:
            health.give_up()
        reason = (f"site {name} was unavailable for {health.failing_for():.0f} s and was "
                  f"given up ({health.last_error or 'its poll did not answer'})")
        lost = [j for j, site in self._where.items() if site == name and j in self._active]
        for job_id in lost:
            self.on_event(JobEvent(now, job_id, JobState.FAILED, 0, reason))
        rm = self._sites.get(name)
        if lost and isinstance(rm, Abandoning):
            rm.abandon(lost)
        return lost

    def _offline_view(self, name: str) -> ClusterView:
        last = None if self.last_view is None else self.last_view.clusters.get(name)
        nodes, reserve = (0, 0) if last is None else (last.nodes, last.reserve)
        return ClusterView(name, nodes, 0, reserve, speed=1.0 if last is None else last.speed,
                           online=False)

    def _site_of(self, action: Action) -> str | None:
        if isinstance(action, Place):
            return action.cluster
        return self._where.get(getattr(action, "job_id", ""))

    def _reachable(self, action: Action) -> bool:
        """False for an action on a site that failed earlier in this cycle (or before)."""
        site = self._site_of(action)
        health = None if site is None else self.health.get(site)
        return health is None or (health.online and not health.busy)

    def _action_failed(self, action: Action, exc: ExternalError) -> int | None:
        """A command failed on one site: mark that site failed; the action did nothing."""
        site = self._site_of(action)
        logger.warning("%s of %s failed: %s", type(action).__name__.lower(),
                       getattr(action, "job_id", ""), exc)
        if site is not None:
            self.site_health(site).failed(str(exc))
        return _nothing(action)

    def on_event(self, event: JobEvent) -> None:
        """Record a start, resize or end reported by an adapter."""
        record = self.records.get(event.job_id)
        if record is None or (record.state.finished and event.job_id not in self._active):
            return  # unknown, or ended here already (recorded failed when its site was given up)
        if event.state is JobState.WAITING or (
                event.retriable and event.state.finished and self._may_retry(event)):
            self._requeue(event)
            return
        if self.journal is not None:
            self.journal.job_event(event)
        if event.state.finished:
            record.finish(event.time, event.state, event.reason)
            self._active.discard(event.job_id)
            self.in_flight.pop(event.job_id, None)
        elif event.state is JobState.RUNNING:
            record.resize(event.time, event.size)
        if event.answer:
            self._answered(event)

    def _answered(self, event: JobEvent) -> None:
        """A pending grow or shrink answered: record what the job took or gave back."""
        self.in_flight.pop(event.job_id, None)
        cluster = self._where.get(event.job_id, "")
        if event.amount > 0:
            self._log(Operation(event.time, event.answer, event.job_id, cluster, event.amount))
        else:
            logger.info("%s of %s on %s refused: %s", event.answer, event.job_id, cluster,
                        event.reason or "no reason given")

    def _may_retry(self, event: JobEvent) -> bool:
        return self.retries.get(event.job_id, 0) < self.max_retries

    def _requeue(self, event: JobEvent) -> None:
        """The job goes back to the queue: given back by its adapter, or retried."""
        job_id = event.job_id
        cluster = self._where.pop(job_id, "")
        self.in_flight.pop(job_id, None)
        reason = event.reason
        if event.state is not JobState.WAITING:
            attempt = self.retries[job_id] = self.retries.get(job_id, 0) + 1
            reason = f"{event.reason}; submitted again (retry {attempt} of {self.max_retries})"
            logger.warning("job %s failed on %s through no fault of its own: %s", job_id,
                           cluster, reason)
            self._log(Operation(event.time, "retry", job_id, cluster, attempt))
        if self.journal is not None:
            self.journal.job_event(JobEvent(event.time, job_id, JobState.WAITING, 0, reason))
        self.records[job_id].requeue()
        self._active.add(job_id)
        self._queue[job_id] = WaitingJob(self.records[job_id].spec)

    @property
    def failed(self) -> list[JobRecord]:
        """Jobs that ended FAILED (rejected, not placed, or failed on a site)."""
        return [r for r in self.records.values() if r.state is JobState.FAILED]

    # -------------------------------------------------------------- durable state

    def export_state(self) -> dict[str, object]:
        """What must survive a restart besides the journal's records: the policy's memory
        (a policy with ``export_state``) and the failed tries of the waiting jobs."""
        state: dict[str, object] = {"tries": {j: w.tries for j, w in self._queue.items()
                                              if w.tries}}
        policy = _stateful(self.policy)
        if policy is not None:
            state["policy"] = policy.export_state()
        return state

    def import_state(self, state: Mapping[str, object]) -> None:
        """Take up :meth:`export_state`'s output after a restart."""
        tries = state.get("tries")
        if isinstance(tries, dict):
            for job_id, count in tries.items():
                waiting = self._queue.get(job_id)
                if waiting is not None and isinstance(count, int):
                    self._queue[job_id] = WaitingJob(waiting.spec, count)
        policy = _stateful(self.policy)
        saved = state.get("policy")
        if policy is not None and isinstance(saved, dict):
            policy.import_state(saved)

    # -------------------------------------------------------------- actions

    def _apply(self, action: Action, now: float, placed: list[str],
               deferred: list[str]) -> int | None:
        if isinstance(action, Place):  # the hot cases first, without pattern matching
            return self._place(action.job_id, action.cluster, action.size, now, placed)
        if isinstance(action, Defer):
            deferred.append(action.job_id)
            return None
        match action:
            case Grow(job_id, offer):
                return self._grow(job_id, offer, now)
            case Shrink(job_id, amount, mandatory):
                return self._shrink(job_id, amount, mandatory, now)
            case Cancel(job_id, reason):
                self._cancel(job_id, reason, now, placed)
            case Reject(job_id, reason):
                self._reject(job_id, reason, now, placed)
            case _:
                raise MalleableError(f"policy {self.policy.name} yielded an unknown action "
                                     f"{action!r}")
        return None

    def _place(self, job_id: str, cluster: str, size: int, now: float,
               placed: list[str]) -> int:
        waiting = self._queue.get(job_id)
        if waiting is None or job_id in placed:
            logger.warning("policy placed %s, which is not waiting", job_id)
            return 0
        granted = self._sites[cluster].start(waiting.spec, size)
        if granted:
            placed.append(job_id)
            self._where[job_id] = cluster
            self.records[job_id].place(now, cluster)
            self._log(Operation(now, "place", job_id, cluster, granted))
        return granted

    def _grow(self, job_id: str, offer: int, now: float) -> int:
        cluster = self._where.get(job_id)
        if cluster is None or offer <= 0 or job_id in self.in_flight:
            return 0
        accepted = self._sites[cluster].offer_grow(job_id, offer)
        if accepted == PENDING:
            self.in_flight[job_id] = "grow"
            return self._claimed(job_id, cluster, offer)
        if accepted > 0:
            self._log(Operation(now, "grow", job_id, cluster, accepted))
        return max(0, accepted)

    def _claimed(self, job_id: str, cluster: str, offer: int) -> int:
        """What the policy hears for a grow answered PENDING: the nodes the job takes of
        ``offer`` if the grow succeeds. They are claimed while it is in flight (the
        adapter no longer counts them idle), so the policy must not offer them to another
        job or place into them in this cycle; a refusal frees them from the next view on."""
        job = self.last_view.job(job_id) if self.last_view is not None else None
        if job is None or job.cluster != cluster:
            return 0
        return job.spec.accepts(job.size, offer)

    def _shrink(self, job_id: str, amount: int, mandatory: bool, now: float) -> int:
        cluster = self._where.get(job_id)
        if cluster is None or amount <= 0 or job_id in self.in_flight:
            return 0
        released = self._sites[cluster].request_shrink(job_id, amount, mandatory)
        if released == PENDING:
            self.in_flight[job_id] = "shrink"
            return 0
        if released > 0:
            self._log(Operation(now, "shrink", job_id, cluster, released))
        return max(0, released)

    def _cancel(self, job_id: str, reason: str, now: float, placed: list[str]) -> None:
        cluster = self._where.get(job_id)
        if cluster is not None:
            self._sites[cluster].cancel(job_id)
        elif job_id in self._queue:
            placed.append(job_id)  # leaves the queue after the decision
            self.records[job_id].finish(now, JobState.CANCELLED, reason)
            self._active.discard(job_id)
        self._log(Operation(now, "cancel", job_id, cluster or "", 0))

    def _reject(self, job_id: str, reason: str, now: float, placed: list[str]) -> None:
        if job_id not in self._queue or job_id in placed:  # not waiting, or placed just now
            return
        if self.health and any((not h.online or h.busy) and not h.given_up
                               for h in self.health.values()):
            logger.debug("job %s kept waiting while a site is offline: %s", job_id, reason)
            return  # it may fit on the site that is offline: refuse it only when all answer
        logger.warning("job %s rejected: %s", job_id, reason)
        placed.append(job_id)
        self.records[job_id].finish(now, JobState.FAILED, reason)
        self._active.discard(job_id)
        self._log(Operation(now, "reject", job_id, "", 0))

    def _settle_queue(self, placed: list[str], deferred: list[str], now: float) -> None:
        for job_id in placed:
            self._queue.pop(job_id, None)
        for job_id in deferred:
            waiting = self._queue.get(job_id)
            if waiting is None:
                continue
            tries = waiting.tries + 1
            if self.max_tries is not None and tries >= self.max_tries:
                del self._queue[job_id]
                self.records[job_id].finish(now, JobState.FAILED,
                                            f"not placed after {tries} tries")
                self._active.discard(job_id)
                self._log(Operation(now, "reject", job_id, "", 0))
            else:
                self._queue[job_id] = WaitingJob(waiting.spec, tries)

    def _log(self, op: Operation) -> None:
        self.operations.append(op)
        if self.journal is not None:
            self.journal.operation(op)


class Stateful(Protocol):
    """A policy with memory that must survive a restart (AC-DS's desire estimators)."""

    def export_state(self) -> dict[str, object]:
        """The policy's memory as JSON-able data."""
        ...

    def import_state(self, state: Mapping[str, object]) -> None:
        """Take up what :meth:`export_state` returned before a restart."""
        ...


def _stateful(policy: object) -> Stateful | None:
    """The policy (or the one it wraps, ``inner``) if it has state to export."""
    while policy is not None:
        if hasattr(policy, "export_state") and hasattr(policy, "import_state"):
            return policy
        policy = getattr(policy, "inner", None)
    return None


def _nothing(action: Action) -> int | None:
    """The answer of an action that was not carried out."""
    return 0 if isinstance(action, (Place, Grow, Shrink)) else None


#: What :func:`_then_end` yields once the decision has ended: an action no policy holds
#: (compared by identity), so that a policy yielding None still meets ``_apply``'s error.
_END: Action = Defer("")


def _then_end(steps: Steps) -> Generator[Action, int | None, None]:
    """The decision's actions (answers passed on), then :data:`_END` instead of its end.

    The cycle stops on it, then ends this with ``next(steps, None)``, rather than catching
    ``StopIteration`` from ``send``: compiled (setup.py), that catch recorded a traceback
    entry every cycle, while ``yield from`` and ``next`` with a default end without one;
    pure, the exception cost more than this generator does (docs/notes/issue-17-compiled10.md)."""
    yield from steps
    yield _END
