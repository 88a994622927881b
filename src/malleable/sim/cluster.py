"""A simulated cluster that implements the :class:`ResourceManager` protocol.

Jobs progress at ``speed / time(n)`` of their work per second at size ``n``; a
resize keeps the work done and costs ``reconfig_cost`` seconds without progress.
A shrink's nodes are released ``release_delay`` seconds after the job agreed (the
time an application takes to reach its next reconfiguration point); until then
they are neither the job's to use nor idle. Jobs that the manager did not submit
(background load) occupy nodes too and show as ``managed=False``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import partial
from types import MappingProxyType

from malleable.apps import AppCatalog, TimeModel, standard_catalog
from malleable.model import ClusterView, JobSpec, JobState, RunningJob
from malleable.resources import Capability, JobEvent
from malleable.sim.engine import END, RELEASE, Engine

_EPS = 1e-9
_LOG_LIMIT = 4096
"""Changed ids kept in one log before a new one starts (bounds the memory of a long run)."""


@dataclass(slots=True)
class _Job:
    spec: JobSpec
    curve: TimeModel
    size: int
    start: float
    managed: bool
    progress: float = 0.0
    last: float = 0.0
    paused_until: float = 0.0
    releasing: int = 0
    resized_at: float = 0.0
    version: int = 0
    view: RunningJob | None = None

    def __init__(self, spec: JobSpec, curve: TimeModel, size: int, start: float, managed: bool,
                 progress: float = 0.0, last: float = 0.0, paused_until: float = 0.0,
                 releasing: int = 0, resized_at: float = 0.0, version: int = 0,
                 view: RunningJob | None = None) -> None:
        # Written, not generated: compiled, a dataclass's generated __init__ stays Python code
        # (tests/unit/test_model_init.py checks it against the generated one).
        self.spec = spec
        self.curve = curve
        self.size = size
        self.start = start
        self.managed = managed
        self.progress = progress
        self.last = last
        self.paused_until = paused_until
        self.releasing = releasing
        self.resized_at = resized_at
        self.version = version
        self.view = view


@dataclass
class SimCluster:
    """One modelled cluster, driven by an :class:`Engine`."""

    name: str
    nodes: int
    engine: Engine
    reserve: int = 0
    speed: float = 1.0
    reconfig_cost: float = 0.0
    release_delay: float = 0.0
    capabilities: frozenset[Capability] = frozenset(
        {Capability.SHRINK, Capability.EXPAND, Capability.MOLDABLE})
    idle: int = field(init=False)
    busy_area: float = field(init=False)
    timeline: list[tuple[float, int]] | None = None
    catalog: AppCatalog = field(default_factory=standard_catalog, repr=False)
    _jobs: dict[str, _Job] = field(init=False, default_factory=dict)
    _events: list[JobEvent] = field(init=False, default_factory=list)
    _last_change: float = field(init=False)
    # The last view, and the running jobs' views it is built from: rebuilt only for the
    # jobs that changed (in start order), and copied so that a view never changes later.
    _views: dict[str, RunningJob] = field(init=False, default_factory=dict)
    _holes: int = field(init=False)  # entries deleted from _views since it was made
    _stale: dict[str, None] = field(init=False, default_factory=dict)
    _cached: ClusterView | None = field(init=False)
    # The ids whose view changed, in the order the views showed them (ClusterView.changes:
    # EASY's index of expected ends reads only those); a new list past _LOG_LIMIT ids.
    _log: list[str] = field(init=False)

    def __post_init__(self) -> None:
        self.idle = self.nodes
        self.busy_area = 0.0
        self._cached = None
        self._holes = 0
        self._log = []
        self._last_change = self.engine.now

    # ---------------------------------------------------------- ResourceManager

    def observe(self) -> ClusterView:
        if self._cached is None:
            views = self._views
            for job_id in self._stale:
                job = self._jobs.get(job_id)
                if job is None:
                    if views.pop(job_id, None) is not None:
                        self._holes += 1
                else:
                    views[job_id] = self._view(job)
            if len(self._log) >= _LOG_LIMIT:  # a new log: readers compare everything once
                self._log = []
            log = self._log
            for job_id in self._stale:  # not extend(): compiled, a loop is 1/5 of its cost
                log.append(job_id)
            self._stale.clear()
            # The view gets a copy, so that it never changes later. ``dict.copy()`` copies
            # a dict's table at once while at most a third of its entries are deleted ones
            # (each ended job leaves one until the dict grows), and item by item past that
            # (about 8,000 instructions for 40 running jobs: a tenth of a FIFO run,
            # docs/notes/issue-17-speed13.md). So, once the deleted entries may be that
            # many, the dict this cluster writes is made anew, compact (``dict()`` of a
            # dict with deleted entries inserts item by item: always compact, where
            # ``copy()`` would keep them), and the view keeps the old one, never written
            # again. A dict that grew was made compact too, unseen: then this is early.
            if 2 * self._holes > len(views):
                snapshot, self._views, self._holes = views, dict(views), 0
            else:
                snapshot = views.copy()
            self._cached = ClusterView(self.name, self.nodes, self.idle, self.reserve,
                                       MappingProxyType(snapshot), 0, self.speed,
                                       True, (self._log, len(self._log)))
        return self._cached

    def start(self, spec: JobSpec, size: int, managed: bool = True) -> int:
        if size < 1 or size > self.idle:
            return 0
        now = self.engine.now
        # _account, _mark and _touch inlined: the one start a job has (issue 36: calls a job)
        if now > self._last_change:
            self.busy_area += (self.nodes - self.idle) * (now - self._last_change)
            self._last_change = now
        self.idle -= size
        if self.timeline is not None:
            self.timeline.append((now, self.nodes - self.idle))
        curve = self.catalog.time_model(spec)
        job_id = spec.id
        job = _Job(spec, curve, size, now, managed, last=now, resized_at=now)
        self._jobs[job_id] = job
        self._stale[job_id] = None
        self._cached = None
        self._schedule_end(job)
        if managed:
            self._events.append(JobEvent(now, job_id, JobState.RUNNING, size))
        return size

    def offer_grow(self, job_id: str, offer: int) -> int:
        job = self._jobs.get(job_id)
        if (job is None or not job.managed or not job.spec.malleable
                or Capability.EXPAND not in self.capabilities):
            return 0
        accepted = job.spec.accepts(job.size - job.releasing, min(offer, self.idle))
        if accepted <= 0:
            return 0
        self._account(self.engine.now)
        self.idle -= accepted
        self._mark()
        self._resize(job, job.size + accepted)
        return accepted

    def request_shrink(self, job_id: str, amount: int, mandatory: bool) -> int:
        job = self._jobs.get(job_id)
        if (job is None or not job.managed or not job.spec.malleable
                or Capability.SHRINK not in self.capabilities):
            return 0
        released = job.spec.releases(job.size - job.releasing, amount)
        if released <= 0:
            return 0
        if self.release_delay <= 0:
            self._release(job, released)
        else:
            job.releasing += released
            job.view = None
            self._touch(job_id)
            self.engine.at(self.engine.now + self.release_delay,
                           lambda: self._release_later(job, released), RELEASE)
        return released

    def cancel(self, job_id: str) -> None:
        job = self._jobs.get(job_id)
        if job is not None:
            self._finish(job, JobState.CANCELLED)

    def close(self) -> None:
        """Nothing to release: a simulated cluster holds no connection."""

    def drain_events(self) -> Sequence[JobEvent]:
        if not self._events:
            return ()
        events, self._events = self._events, []
        return events

    # ---------------------------------------------------------- simulation

    @property
    def busy(self) -> int:
        return self.nodes - self.idle

    def utilization(self, until: float) -> float:
        """Time-averaged fraction of busy nodes from time 0 to ``until``."""
        self._account(until)
        return self.busy_area / (self.nodes * until) if until > 0 else 0.0

    def _account(self, now: float) -> None:
        if now > self._last_change:
            self.busy_area += (self.nodes - self.idle) * (now - self._last_change)
            self._last_change = now

    def _mark(self) -> None:
        if self.timeline is not None:
            self.timeline.append((self.engine.now, self.nodes - self.idle))

    def _touch(self, job_id: str) -> None:
        """The job's view changed (or it started or ended): the next observe shows it."""
        self._stale[job_id] = None
        self._cached = None

    def _view(self, job: _Job) -> RunningJob:
        if job.view is None:
            job.view = RunningJob(job.spec, self.name, job.size, job.start, job.managed,
                                  job.releasing, resized_at=job.resized_at)
        return job.view

    def _advance(self, job: _Job, now: float) -> None:
        begin = max(job.last, job.paused_until)
        if now > begin:
            job.progress += (now - begin) * self.speed / job.curve(job.size)
        job.last = now

    def _schedule_end(self, job: _Job) -> None:
        job.version += 1
        version = job.version
        remaining = max(0.0, 1.0 - job.progress)
        begin = max(self.engine.now, job.paused_until)
        end = begin + remaining * job.curve(job.size) / self.speed
        self.engine.at(end, partial(self._end, job, version), END)  # no lambda frame an end

    def _end(self, job: _Job, version: int) -> None:
        if job.version == version and job.spec.id in self._jobs:
            self._finish(job, JobState.COMPLETED)

    def _finish(self, job: _Job, state: JobState) -> None:
        now = self.engine.now
        # _account, _mark and _touch inlined, as in start()
        if now > self._last_change:
            self.busy_area += (self.nodes - self.idle) * (now - self._last_change)
            self._last_change = now
        job_id = job.spec.id
        del self._jobs[job_id]
        self._stale[job_id] = None
        self._cached = None
        job.version += 1
        self.idle += job.size
        if self.timeline is not None:
            self.timeline.append((now, self.nodes - self.idle))
        if job.managed:
            self._events.append(JobEvent(now, job_id, state, 0))

    def _resize(self, job: _Job, size: int) -> None:
        now = self.engine.now
        self._advance(job, now)
        job.size = size
        job.resized_at = now
        job.view = None
        self._touch(job.spec.id)
        if self.reconfig_cost > 0:
            job.paused_until = max(job.paused_until, now) + self.reconfig_cost
        self._schedule_end(job)
        self._events.append(JobEvent(now, job.spec.id, JobState.RUNNING, size))

    def _release(self, job: _Job, released: int) -> None:
        self._account(self.engine.now)
        self.idle += released
        self._mark()
        self._resize(job, job.size - released)

    def _release_later(self, job: _Job, released: int) -> None:
        if self._jobs.get(job.spec.id) is not job:
            return  # ended first: its nodes went back with it
        job.releasing -= released
        self._release(job, released)
