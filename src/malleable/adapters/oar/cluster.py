"""An OAR site as a :class:`~malleable.resources.ResourceManager`, with emulated malleability.

OAR 2.5 cannot change a running job's resources. As KOALA ran malleable jobs on GRAM, a
malleable job here is a *collection*: a base job of the job's minimum size (it runs the
work, :mod:`~malleable.adapters.oar.payload`) and one single-node *extension* job per
node above it, named after the base (``m.RUN.JOB+``). The job's size is the nodes of its
base and of its running extensions.

* **Start** at ``size``: the base job (``min_size`` nodes for a malleable job, ``size``
  for a rigid one) and ``size - base`` extensions, all submitted at once. OAR may run the
  base a poll before its extensions: the start is reported once every start-time
  extension runs (or ended), with the size they give; until then the job is not in the
  view's running jobs and its requested nodes are not idle. Extensions still not running
  ``grow_wait`` (+ per node) after the base started are deleted and not counted.
* **Grow** by ``k``: ``k`` extensions in one array submission (``oarsub --array k``),
  then wait (``grow_wait`` + ``grow_wait_per_node`` per extension: OAR launches each job
  through its own ssh and ``oarexec``) until OAR runs them; those not running by then are
  deleted and not counted (a refusal costs that wait).
* **Shrink** by ``k``: ``oardel`` of the ``k`` newest extensions; the size drops at once,
  and so do the nodes held: the view counts them idle at once, although OAR lists the
  deleted jobs ``Finishing`` (holding their nodes) for a second or more. A view that showed
  them busy made a policy shrink again for the same waiting job (PWA: 3 -> 2 -> 1 for one
  2-node job); a job placed or grown there meanwhile waits in OAR's queue that moment
  (a grow's wait, ``grow_wait``, is far longer). A job never shrinks below its base.
* **Dead nodes**: OAR 2.5 does not end a job whose node died (its server is detached
  from the job, and even ``oardel`` cannot reach the node: the job stays ``Running``
  until Leon exterminates it minutes later). Its node turns ``Suspected`` when finaud
  checks nodes with running jobs (``CHECK_NODES_WITH_RUNNING_JOB="yes"``, as the testbed
  sets; a site without it never learns of the death). At the first poll that shows a
  job's node ``Suspected`` or ``Dead``, an extension job there is deleted and no longer
  counted (the job runs on, one node smaller); a base job there, which runs the work,
  is deleted with its extensions and the job ends FAILED, *retriable* (the manager runs
  it again, as after a node failure on any other kind of site). Each case is one entry of
  ``node_failures`` (journaled, reported in ``summary.json``).
* **Observe**: one call per cycle (``oarnodes -J`` and ``oarstat -J``). Jobs not of this
  run are background load. A base job gone from oarstat's list is read with
  ``oarstat -fJ -j``; one that OAR does not know ends FAILED, never COMPLETED.
* **Journal**: the base job's id and every extension added or released go to the
  journal as they happen; after a restart :meth:`OarCluster.adopt` takes them back from
  it, so a released extension OAR still lists (``Finishing``) is never taken for a live
  one. Extensions OAR accepted but nobody learnt the ids of (a submission that timed
  out) are still found by name at the next poll.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import ClassVar, Protocol

from malleable.adapters.common import Observed
from malleable.adapters.oar.ctl import OarCtl, Poll
from malleable.adapters.oar.parse import OarJob
from malleable.adapters.oar.payload import OarPayload
from malleable.adapters.observing import EventLog, SharedPoll
from malleable.adapters.outcomes import JobJournal
from malleable.clock import Clock
from malleable.errors import ExternalError
from malleable.model import ClusterView, JobKind, JobSpec, JobState, RunningJob
from malleable.resources import Capability, JobEvent

logger = logging.getLogger(__name__)

#: Where base jobs' scripts go, in the submitting user's (shared) home.
SCRIPT_DIR = ".malleable/oar"
#: Node states that say the node died (``Absent`` is an administrator's drain: the jobs
#: there go on).
DEAD_NODE_STATES = frozenset({"Suspected", "Dead"})


def job_name(run: str, job_id: str) -> str:
    """The OAR name of a managed job's base job (its extensions add ``+``)."""
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in job_id)
    return f"m.{run}.{safe}"[:100]


class NativeJournal(JobJournal, Protocol):
    """Where the adapter records the OAR ids of each job's base job (``native_submitted``)
    and extension jobs (SQLite in real runs, :class:`~malleable.store.Store`), read back at
    a restart."""

    def extensions_added(self, site: str, job_id: str, native_ids: Sequence[int]) -> None: ...

    def extensions_released(self, site: str, job_id: str,
                            native_ids: Sequence[int]) -> None: ...

    def extensions(self, site: str, job_id: str) -> tuple[list[int], list[int]]: ...


class OarHooks(Protocol):
    """The adapter's public extension point: what a wrapper (the site service's OAR site,
    :class:`~malleable.site.oarsite.SiteOar`) adds to each poll, to the view of its jobs,
    to finding their extension jobs and to telling a job its size. Given as
    :attr:`OarCluster.hooks`; without it the adapter runs as documented above."""

    def polled(self, poll: Poll) -> None:
        """Called with each poll before the adapter follows its jobs."""
        ...

    def running(self, entry: RunningJob, base: int | None) -> RunningJob:
        """The view's entry of a running job (``base``: its base job, None if not the
        adapter's); the wrapper may show it otherwise (at a fixed size)."""
        ...

    def extensions(self, spec: JobSpec, base: int) -> tuple[str, str]:
        """The OAR name of a job's extension jobs, and the user they must belong to ("":
        any), to find those nobody learnt the ids of."""
        ...

    def tell_size(self, job: Collection, size: int) -> None:
        """Tell a running job its size (instead of the adapter's file)."""
        ...


@dataclass(slots=True)
class Collection:
    """A job this adapter follows (submitted, or placed by a wrapper): its base job and
    its extension jobs. Public for the wrapper that resizes jobs its own way
    (:class:`OarHooks`); only the adapter's methods change it."""

    spec: JobSpec
    base: int | None
    requested: int
    submitted: float
    extensions: list[int] = field(default_factory=list)
    released: list[int] = field(default_factory=list)
    size: int = 0
    started: bool = False
    finished: bool = False
    changed: float = 0.0
    base_running: float | None = None
    """When (``time.monotonic``) the base job was first seen running before the start
    was reported (its start-time extensions still waiting)."""


@dataclass
class OarCluster(Observed[Poll]):
    """One OAR site (see the module docstring)."""

    kind: ClassVar[str] = "oar"
    """Its kind in the adapter registry (:mod:`malleable.kinds`)."""
    name: str
    ctl: OarCtl
    clock: Clock
    run_id: str
    payload: OarPayload = field(default_factory=OarPayload)
    reserve: int = 0
    speed: float = 1.0
    journal: NativeJournal | None = None
    grow_wait: float = 15.0
    grow_wait_per_node: float = 0.5
    capabilities: frozenset[Capability] = frozenset({Capability.SHRINK, Capability.EXPAND})
    last_view: ClusterView | None = None
    sleep: Callable[[float], None] = time.sleep
    _mine: dict[str, Collection] = field(default_factory=dict)
    _events: EventLog = field(default_factory=EventLog)
    _poll: SharedPoll[Poll] = field(init=False)
    _abandoned: set[str] = field(default_factory=set)
    """Jobs let go of (:meth:`abandon`) whose OAR jobs may still be there."""
    _abandoned_lock: threading.Lock = field(default_factory=threading.Lock)
    node_failures: list[dict[str, object]] = field(default_factory=list)
    """One entry per managed job found on dead nodes: its job, OAR job ids, the dead
    nodes, and what was done (``shed``: extensions deleted; ``failed``: its base job's node
    died)."""
    hooks: OarHooks | None = None
    """A wrapper's additions (:class:`OarHooks`)."""

    def __post_init__(self) -> None:
        self._poll = SharedPoll(lambda: self.refresh())  # looked up at each call

    # ------------------------------------------------------------ observing

    def refresh(self) -> None:
        """Take one observation now."""
        poll = self.ctl.poll()
        if self.hooks is not None:
            self.hooks.polled(poll)
        self._cancel_abandoned(poll)
        self._follow_all(poll, self.clock.now())
        self._poll.taken(poll)

    def abandon(self, job_ids: Iterable[str]) -> None:
        """Let go of jobs the manager recorded failed (this site was given up): no more
        events of them, and each poll that answers deletes what of them (base and
        extension jobs) OAR still has, until none is left."""
        with self._abandoned_lock:
            for job_id in job_ids:
                mine = self._mine.get(job_id)
                if mine is not None:
                    mine.finished = True
                    self._abandoned.add(job_id)
        self._stale()

    def _cancel_abandoned(self, poll: Poll) -> None:
        with self._abandoned_lock:
            abandoned = sorted(self._abandoned)
        if not abandoned:
            return
        live = {j.job_id for j in poll.jobs if not j.state.finished}
        gone = []
        for job_id in abandoned:
            mine = self._mine[job_id]
            ids = [i for i in (mine.base, *mine.extensions, *mine.released) if i in live]
            if not ids:
                gone.append(job_id)
                continue
            logger.warning("%s: deleting OAR job(s) %s of %s: the run recorded it failed when "
                           "it gave the site up", self.name, " ".join(map(str, ids)), job_id)
            self.ctl.delete(ids)
        with self._abandoned_lock:
            self._abandoned.difference_update(gone)

    def close(self) -> None:
        self.ctl.runner.close()

    def _view(self, poll: Poll) -> ClusterView:
        usable = {n.address for n in poll.nodes if n.usable}
        # Released extensions OAR still lists (Finishing) leave their nodes idle: a job
        # placed there waits in OAR's queue a moment (module docstring, "Shrink").
        freeing = {e for m in self._mine.values() for e in m.released}
        busy = {a for j in poll.jobs if j.holds_nodes and j.job_id not in freeing
                for a in j.nodes}
        held = {j.job_id: len(j.nodes) for j in poll.jobs if j.holds_nodes}
        # A job whose start is not reported yet claims the requested nodes it does not hold.
        claimed = 0
        for m in self._mine.values():
            if not m.started and not m.finished:
                holds = sum(held.get(j, 0) for j in (m.base, *m.extensions) if j is not None)
                claimed += max(0, m.requested - holds)
        by_base = {m.base: m for m in self._mine.values() if m.base is not None}
        extensions = {e for m in self._mine.values() for e in (*m.extensions, *m.released)}
        running: dict[str, RunningJob] = {}
        pending = 0
        for job in poll.jobs:
            if job.job_id in extensions:
                continue
            mine = by_base.get(job.job_id)
            if job.state is JobState.PENDING:
                pending += mine is None
            elif mine is not None and not mine.started and not mine.finished:
                continue  # its start is not reported yet (extensions waiting): claimed
            elif job.holds_nodes and job.state_raw != "Finishing":
                entry = self._running(job, mine)
                running[entry.id] = entry
        idle = len(usable - busy) - claimed
        return ClusterView(self.name, len(usable), max(0, idle), self.reserve,
                           MappingProxyType(running), pending, self.speed)

    def _running(self, job: OarJob, mine: Collection | None) -> RunningJob:
        entry = self._entry(job, mine)
        if self.hooks is None:
            return entry
        return self.hooks.running(entry, None if mine is None else mine.base)

    def _entry(self, job: OarJob, mine: Collection | None) -> RunningJob:
        start = self.clock.from_epoch(job.start_time or 0.0)
        if mine is not None and not mine.finished:
            return RunningJob(mine.spec, self.name, mine.size or len(job.nodes), start, True)
        size = len(job.nodes)
        spec = JobSpec(f"oar:{self.name}:{job.job_id}", JobKind.RIGID, size, size, size,
                       app="fixed", user=job.owner)
        return RunningJob(spec, self.name, size, start, False)

    # ------------------------------------------------------------ events

    def _follow_all(self, poll: Poll, now: float) -> None:
        by_id = {j.job_id: j for j in poll.jobs}
        dead = {n.address: n.state for n in poll.nodes if n.state in DEAD_NODE_STATES}
        self._adopt_orphans(poll)
        missing = []
        for mine in self._mine.values():
            if mine.finished:
                continue
            mine.extensions = [e for e in mine.extensions if e in by_id]
            mine.released = [e for e in mine.released if e in by_id]
            base = by_id.get(mine.base) if mine.base is not None else None
            if base is None:
                missing.append(mine)
                continue
            if dead and self._dead_nodes(mine, base, by_id, dead, now):
                continue
            self._follow(mine, base, by_id, now)
        if missing:
            self._settle_missing(missing, now)

    def _dead_nodes(self, mine: Collection, base: OarJob, by_id: dict[int, OarJob],
                    dead: dict[str, str], now: float) -> bool:
        """Deal with the job's OAR jobs on dead nodes (see the module docstring); True
        when the job ended (its base job's node died)."""
        if base.state_raw == "Running" and dead.keys() & set(base.nodes):
            lost = sorted(dead.keys() & set(base.nodes))
            ids = [base.job_id, *mine.extensions]
            reason = (f"OAR node {', '.join(lost)} {dead[lost[0]]} under its base job "
                      f"{base.job_id}")
            logger.warning("%s: %s lost its base job's node(s) %s: deleting OAR job(s) %s; "
                           "the job failed and may run again", self.name, mine.spec.id,
                           ",".join(lost), " ".join(map(str, ids)))
            self.ctl.delete(ids)
            self._failure(mine, ids, lost, "failed")
            self._emit(mine, JobEvent(now, mine.spec.id, JobState.FAILED, 0, reason, True))
            self.released(mine, mine.extensions)
            mine.finished, mine.size = True, 0
            return True
        gone = [e for e in mine.extensions
                if by_id[e].state_raw == "Running" and dead.keys() & set(by_id[e].nodes)]
        if gone:
            lost = sorted({n for e in gone for n in by_id[e].nodes} & dead.keys())
            logger.warning("%s: %s lost node(s) %s: deleting its extension job(s) %s and "
                           "running on without them", self.name, mine.spec.id,
                           ",".join(lost), " ".join(map(str, gone)))
            self.ctl.delete(gone)
            self.released(mine, gone)
            self._failure(mine, gone, lost, "shed")
        return False

    def _failure(self, mine: Collection, ids: Sequence[int], lost: Sequence[str],
                 action: str) -> None:
        entry: dict[str, object] = {"job": mine.spec.id, "oar_ids": list(ids),
                                    "dead": ",".join(lost), "action": action}
        self.node_failures.append(entry)
        if self.journal is not None:
            self.journal.node_failure(self.name, entry)

    def restore_node_failures(self, entries: Sequence[Mapping[str, object]]) -> None:
        """Report again, after a restart, the node failures journaled before it (the jobs
        they touched are already released or ended in the journal)."""
        self.node_failures.extend(dict(entry) for entry in entries)

    def _adopt_orphans(self, poll: Poll) -> None:
        """Extension jobs OAR accepted although their submission timed out (or whose answer
        was lost, or a restart came): found by name (and owner, with :attr:`hooks`)."""
        names: dict[str, tuple[str, Collection]] = {}
        for m in self._mine.values():
            if not m.finished and m.base is not None:
                name, owner = self._extensions_of(m.spec, m.base)
                names[name] = (owner, m)
        known = {e for m in self._mine.values() for e in (*m.extensions, *m.released)}
        for job in poll.jobs:
            named = names.get(job.name)
            if named is None:
                continue
            owner, mine = named
            if ((not owner or job.owner == owner) and job.job_id not in known
                    and not job.state.finished):
                logger.info("%s: OAR job %d is an extension of %s", self.name, job.job_id,
                            mine.spec.id)
                mine.extensions.append(job.job_id)
                self.journal_extensions(mine, added=[job.job_id])

    def _extensions_of(self, spec: JobSpec, base: int) -> tuple[str, str]:
        """The name of a job's extension jobs and the user they must belong to ("": any)."""
        if self.hooks is not None:
            return self.hooks.extensions(spec, base)
        return self._name(spec) + "+", ""

    def _size(self, mine: Collection, base: OarJob, by_id: dict[int, OarJob]) -> int:
        exts = (by_id[e] for e in mine.extensions if e in by_id)
        return len(base.nodes) + sum(len(e.nodes) for e in exts if e.state_raw == "Running")

    def _follow(self, mine: Collection, base: OarJob, by_id: dict[int, OarJob], now: float) -> None:
        state = base.state
        if state is JobState.UNKNOWN:
            logger.warning("%s: job %d is in state %r, which the adapter does not know",
                           self.name, base.job_id, base.state_raw)
            return
        if state.finished:
            self._end(mine, base, now)
            return
        if base.state_raw != "Running" or not base.nodes:
            return
        if not mine.started and not self._extensions_settled(mine, by_id):
            return
        size = self._size(mine, base, by_id)
        if not mine.started:
            start = self._clamp(base.start_time, mine.submitted, now)
            self._emit(mine, JobEvent(start, mine.spec.id, JobState.RUNNING, size))
            mine.started, mine.size = True, size
        elif size != mine.size:
            logger.info("%s: job %s now has %d nodes (was %d)", self.name, mine.spec.id, size,
                        mine.size)
            self._emit(mine, JobEvent(now, mine.spec.id, JobState.RUNNING, size))
            mine.size = size

    def _extensions_settled(self, mine: Collection, by_id: dict[int, OarJob]) -> bool:
        """Whether the start can be reported: every start-time extension runs or ended.
        Those still waiting ``grow_wait`` (+ per node) after the base started are
        deleted (as a grow's late extensions are) and the start goes on without them."""
        waiting = [e for e in mine.extensions if by_id[e].state_raw != "Running"]
        if not waiting:
            return True
        if mine.base_running is None:
            mine.base_running = time.monotonic()
        wait = self.grow_wait + self.grow_wait_per_node * len(mine.extensions)
        if time.monotonic() - mine.base_running < wait:
            return False
        logger.warning("%s: %d of %d start-time extensions of %s did not start within "
                       "%.0f s of its base job", self.name, len(waiting),
                       len(mine.extensions), mine.spec.id, wait)
        self.ctl.delete(waiting)
        self.released(mine, waiting)
        return True

    def _end(self, mine: Collection, job: OarJob, now: float) -> None:
        if not mine.started and job.start_time is not None and job.nodes:
            start = self._clamp(job.start_time, mine.submitted, now)
            self._emit(mine, JobEvent(start, mine.spec.id, JobState.RUNNING, len(job.nodes)))
        state = job.state
        end = self._clamp(job.stop_time, max(mine.submitted, mine.changed), now)
        reason = "" if state is JobState.COMPLETED else f"OAR {job.state_raw}"
        self._emit(mine, JobEvent(end, mine.spec.id, state, 0, reason))
        mine.finished, mine.size = True, 0
        if mine.extensions:
            self.ctl.delete(mine.extensions)
            mine.extensions = []

    def _settle_missing(self, missing: list[Collection], now: float) -> None:
        """Base jobs gone from oarstat's list: their end from ``oarstat -fJ -j``."""
        ids = [m.base for m in missing if m.base is not None]
        try:
            found = {j.job_id: j for j in self.ctl.jobs(ids)}
        except ExternalError as exc:
            logger.warning("%s: oarstat -fJ failed (%s); will retry next cycle", self.name, exc)
            return
        for mine in missing:
            job = found.get(mine.base) if mine.base is not None else None
            if job is not None and job.state.finished:
                self._end(mine, job, now)
            elif job is None:
                self._emit(mine, JobEvent(now, mine.spec.id, JobState.FAILED, 0,
                                          f"OAR does not know job {mine.base}"))
                mine.finished = True

    def _emit(self, mine: Collection, event: JobEvent) -> None:
        mine.changed = max(mine.changed, event.time)
        self._events.append(event)
        if event.state is JobState.RUNNING:
            self._tell_size(mine, event.size)

    def _tell_size(self, mine: Collection, size: int) -> None:
        """Write the size the job has in OAR where its payload reads it (or have the
        :attr:`hooks` tell it)."""
        if self.hooks is not None:
            self.hooks.tell_size(mine, size)
            return
        try:
            self.ctl.write(f"{self._script(mine.spec)}.size", f"{size}\n")
        except ExternalError as exc:
            logger.warning("%s: cannot tell %s its size %d: %s", self.name, mine.spec.id, size,
                           exc)

    # ------------------------------------------------------------ acting

    def _name(self, spec: JobSpec) -> str:
        return job_name(self.run_id, spec.id)

    def _script(self, spec: JobSpec) -> str:
        """The base job's script path without its suffix (``.py``; ``.size`` its size)."""
        return f"{SCRIPT_DIR}/{self.run_id}/{self._name(spec)}"

    def start(self, spec: JobSpec, size: int) -> int:
        if size < 1:
            return 0
        platform = sum(n.usable for n in (self._poll.latest or self.ctl.poll()).nodes)
        if size > platform:
            # OAR rejects a request beyond the platform; so does the collection as a whole.
            logger.warning("%s: %s asks %d nodes of %d: refused", self.name, spec.id, size,
                           platform)
            return 0
        base_size = min(size, spec.min_size) if spec.malleable else size
        name = self._name(spec)
        path = f"{self._script(spec)}.py"
        walltime = self.payload.walltime(spec)
        try:
            self.ctl.write(path, self.payload.script(spec))
            base = self.ctl.submit(["-n", name, "-l", f"nodes={base_size},walltime={walltime}"],
                                   f"python3 {path}")[0]
        except ExternalError as exc:
            logger.warning("%s: oarsub of %s refused: %s", self.name, spec.id, exc)
            return 0
        self._stale()
        mine = self._track(spec, base, requested=size)
        if self.journal is not None:
            self.journal.native_submitted(self.name, spec.id, base)
        if size > base_size:
            mine.extensions = self._extend(spec, base, size - base_size)
            self.journal_extensions(mine, added=mine.extensions)
        logger.info("%s: submitted %s as OAR job %d (%d nodes + %d extensions)", self.name,
                    spec.id, base, base_size, len(self._mine[spec.id].extensions))
        return base_size + len(self._mine[spec.id].extensions)

    def _extend(self, spec: JobSpec, base: int, count: int) -> list[int]:
        options = ["-n", self._name(spec) + "+", "-l",
                   f"nodes=1,walltime={self.payload.walltime(spec)}"]
        try:
            return self.ctl.submit(options, OarPayload.extension(base), count)
        except ExternalError as exc:
            logger.warning("%s: extensions of %s refused: %s", self.name, spec.id, exc)
            return []

    def adopt(self, spec: JobSpec, native_id: int | None, *, requested: int = 0,
              started: bool = False, size: int = 0, since: float | None = None) -> None:
        """Take charge again of a job found in the journal after a restart, with the
        extension jobs the journal lists (live and released)."""
        mine = self._track(spec, native_id, requested=requested, started=started, size=size,
                           since=since)
        if self.journal is not None and native_id is not None:
            mine.extensions, mine.released = self.journal.extensions(self.name, spec.id)

    def _track(self, spec: JobSpec, native_id: int | None, *, requested: int = 0,
               started: bool = False, size: int = 0, since: float | None = None) -> Collection:
        now = self.clock.now() if since is None else since
        mine = Collection(spec, native_id, requested or size, now, size=size, started=started,
                     changed=now)
        self._mine[spec.id] = mine
        return mine

    def collection(self, job_id: str) -> Collection | None:
        """The base and extension jobs of a job this adapter follows (None: not followed)."""
        return self._mine.get(job_id)

    def of_base(self, base: int) -> Collection | None:
        """The unfinished job whose base job is ``base`` (None: none)."""
        return next((m for m in self._mine.values() if m.base == base and not m.finished),
                    None)

    def resized(self, mine: Collection, size: int) -> None:
        """A wrapper resized a running job (its extension jobs already recorded with
        :meth:`extended` / :meth:`released`): its size is ``size`` (a job event says so)."""
        mine.size = size
        self._emit(mine, JobEvent(self.clock.now(), mine.spec.id, JobState.RUNNING, size))

    def extended(self, mine: Collection, added: Sequence[int]) -> None:
        """A wrapper's extension jobs of a job now run: counted as the job's (journal them
        with :meth:`journal_extensions`, before the wait if a restart may come)."""
        mine.extensions.extend(added)

    def forget(self, job_ids: Iterable[str]) -> None:
        """Stop keeping finished jobs and their node failures (the journal keeps them)."""
        gone = set(job_ids)
        for job_id in gone:
            mine = self._mine.get(job_id)
            if mine is not None and mine.finished:
                del self._mine[job_id]
        self.node_failures = [e for e in self.node_failures if e.get("job") not in gone]

    def released(self, mine: Collection, gone: Sequence[int]) -> None:
        """Extension jobs just deleted: no longer the job's, remembered (and journaled) as
        released so that OAR still listing them is never taken for live ones."""
        gone = list(gone)
        mine.extensions = [e for e in mine.extensions if e not in gone]
        mine.released.extend(gone)
        self.journal_extensions(mine, released=gone)

    def journal_extensions(self, mine: Collection, added: Sequence[int] = (),
                           released: Sequence[int] = ()) -> None:
        """Journal extension jobs submitted (before they run: a restart may come) or let
        go of, without changing what the adapter counts."""
        if self.journal is None:
            return
        if added:
            self.journal.extensions_added(self.name, mine.spec.id, added)
        if released:
            self.journal.extensions_released(self.name, mine.spec.id, released)

    def native_id(self, job_id: str) -> int | None:
        mine = self._mine.get(job_id)
        return None if mine is None else mine.base

    def offer_grow(self, job_id: str, offer: int) -> int:
        mine = self.resizable(job_id)
        if mine is None or offer <= 0 or Capability.EXPAND not in self.capabilities:
            return 0
        accepted = mine.spec.accepts(mine.size, offer)
        if accepted <= 0 or mine.base is None:
            return 0
        self._stale()
        new = self._extend(mine.spec, mine.base, accepted)
        self.journal_extensions(mine, added=new)  # before the wait: a restart may come
        wait = self.grow_wait + self.grow_wait_per_node * len(new)
        running = self.await_running(new, wait)
        late = [e for e in new if e not in running]
        if late:
            self.ctl.delete(late)
            mine.released.extend(late)
            logger.warning("%s: %d of %d extensions of %s did not start within %.0f s",
                           self.name, len(late), len(new), job_id, wait)
        mine.extensions.extend(running)
        self.journal_extensions(mine, released=late)
        if running:
            mine.size += len(running)
            self._emit(mine, JobEvent(self.clock.now(), job_id, JobState.RUNNING, mine.size))
        return len(running)

    def await_running(self, ids: list[int], wait: float) -> list[int]:
        """Wait up to ``wait`` seconds until OAR runs (or ends) the jobs ``ids``: those
        running then."""
        deadline = time.monotonic() + wait
        while ids:
            jobs = {j.job_id: j for j in self.ctl.jobs(ids)}
            running = [i for i in ids if i in jobs and jobs[i].state_raw == "Running"]
            ended = [i for i in ids if i in jobs and jobs[i].state.finished]
            if len(running) + len(ended) == len(ids) or time.monotonic() >= deadline:
                return running
            self.sleep(0.5)
        return []

    def request_shrink(self, job_id: str, amount: int, mandatory: bool) -> int:
        mine = self.resizable(job_id)
        if mine is None or amount <= 0 or Capability.SHRINK not in self.capabilities:
            return 0
        released = min(mine.spec.releases(mine.size, amount), len(mine.extensions))
        if released <= 0:
            return 0
        self._stale()
        gone = mine.extensions[-released:]
        self.ctl.delete(gone)
        self.released(mine, gone)
        mine.size -= released
        self._emit(mine, JobEvent(self.clock.now(), job_id, JobState.RUNNING, mine.size))
        return released

    def cancel(self, job_id: str) -> None:
        mine = self._mine.get(job_id)
        if mine is not None and mine.base is not None and not mine.finished:
            self._stale()
            self.ctl.delete([mine.base, *mine.extensions])

    def resizable(self, job_id: str) -> Collection | None:
        """A job that may be resized now: followed, running, malleable (None: not now)."""
        mine = self._mine.get(job_id)
        if (mine is None or mine.base is None or not mine.started or mine.finished
                or not mine.spec.malleable):
            return None
        return mine
