"""An OAR site of the site service: users' held tagged jobs, resumed where the policy
places them (docs/oar.md, "The site service on OAR").

:class:`SiteOar` is the OAR adapter (:class:`~malleable.adapters.oar.cluster.OarCluster`:
the same one-call poll, ``oarnodes -J`` then ``oarstat -J``, the same events and end
states) with these differences:

* **Discovery.** Each poll is scanned for jobs of any user whose name is a compact tag
  (:func:`malleable.site.oarjobs.discover`; the owner is oarstat's ``owner``); each becomes
  a :class:`~malleable.site.adapter.Found`, as on Slurm. A name that claims to be a tag
  and is not a valid one is logged once and the job left alone as background load; an
  untagged job is background load.
* **Placement.** A user's job waits in OAR ``Hold`` (``malleable submit``: ``oarsub
  --hold``). ``start`` resumes it with ``sudo -n -u oar oarresume ID``: the service's one
  privilege (OAR lets only a job's owner, ``oar`` or ``root`` resume it). OAR cannot change
  a job's size, so the job starts at the resources it was submitted with (``R=``):
  a placement at fewer nodes is refused (the policy defers the job, logged once), one at
  more is granted at that size. A copy of the same submission on another site is deleted
  with ``sudo -n -u oar oardel ID``, and so is a job the manager cancels.
* **Grow and shrink through the job's agent.** The extension jobs must belong to the
  job's user, so the service asks the job's agent (:mod:`malleable.site.oaragent`,
  MUNGE-authenticated on the application channel) to submit them (``extend``) and to
  delete them (``release``). A job is offered resizes only while its agent is connected:
  otherwise the view shows it at its fixed size (rigid). A grow waits (``grow_wait`` +
  ``grow_wait_per_node`` per node) until OAR runs the new extensions; those still not
  running are released and not counted. A shrink releases the newest extensions, never the
  base job. The size is the base job's nodes plus its running extensions (``oarstat``),
  and extensions left when the base job ends are deleted (``oardel`` as ``oar``). After
  each change the agent writes the job's ``nodes`` and ``size`` files in its run directory.
* **MPI jobs** (``malleable submit --mpi``, tagged ``mpi``) are grown and shrunk by the
  OAR runner's logic (:mod:`malleable.site.oarmpi`) over the agent: extension jobs
  through ``extend``, the new hosts offered to the program through its file channel and
  its answer read back, extensions it declined released; a shrink offers first and
  releases the extensions once the smaller set took over. The service's cycle waits for
  the answer (no pending answers on OAR).
* **Nothing written** by the service itself: it submits no job and writes no file on the
  site (the agent, as the user, does both for the user's own job).
"""

from __future__ import annotations

import getpass
import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import ClassVar

from malleable.adapters.oar.cluster import OarCluster, _Mine
from malleable.adapters.oar.ctl import Poll
from malleable.adapters.oar.parse import OarJob
from malleable.adapters.outcomes import ResizeResult
from malleable.errors import ExternalError
from malleable.model import JobKind, JobSpec, JobState, RunningJob
from malleable.resources import Capability, JobEvent
from malleable.runner.job import Change
from malleable.site.channel import ChannelError, ChannelServer, Session
from malleable.site.oaragent import extension_name, size_text
from malleable.site.oarjobs import OarTagged, discover
from malleable.site.oarmpi import AgentOarMpiJob, agent_mpi_job
from malleable.site.port import Counters, Found

logger = logging.getLogger(__name__)

#: The user the service's ``oarresume`` and ``oardel`` run as (through sudo).
OAR_USER = "oar"
#: Seconds an ``--mpi`` job's grow waits at least for OAR to run its extension jobs (the
#: OAR runner's own default): on the loaded testbed (load 11-23) OAR started a fixed run's
#: freed nodes' extensions after more than the plain jobs' 15 s + 0.5 s per node, twice in
#: a row; each such late grow is deleted and asked again a cycle later, costing more than
#: the wait.
MPI_GROW_WAIT = 60.0


@dataclass
class SiteOar(OarCluster, Counters):
    """An OAR site of the site service (see the module docstring)."""

    kind: ClassVar[str] = "oar"
    id_key: ClassVar[str] = "oar_id"
    """How log lines and ``manager status`` name a job's id on this site."""

    capabilities: frozenset[Capability] = frozenset({Capability.SHRINK, Capability.EXPAND})
    """Declared for the site; a job is resized only while its agent is connected."""
    account: str = ""
    """The service's OAR user (default: this process's user); its own jobs are not users'."""
    found: dict[int, Found] = field(default_factory=dict)
    """Tagged user jobs of the last poll, by OAR id."""
    ignored: dict[int, str] = field(default_factory=dict)
    """Jobs whose tag was refused (logged once), with the reason."""
    placements: int = 0
    """Held copies resumed since the service last counted them."""
    channel: ChannelServer | None = None
    """The application channel: the jobs' agents (None: no job is ever resized)."""
    resizes: list[ResizeResult] = field(default_factory=list)
    """Always empty: OAR resizes are answered at once (no pending answers)."""
    mpi_jobs: dict[str, AgentOarMpiJob] = field(default_factory=dict)
    """The runner's state of ``--mpi`` jobs, over their agents' sessions."""
    _mpi: set[str] = field(default_factory=set)
    """Jobs placed here that were submitted ``--mpi``."""
    _too_small: set[str] = field(default_factory=set)
    _deleted: set[int] = field(default_factory=set)
    """Copies deleted that OAR may still list (``Hold``) a while: not copies any more."""
    _no_agent: set[str] = field(default_factory=set)
    """Jobs whose missing agent was logged (once)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.ctl.sudo_to is None:
            self.ctl = self.ctl.via_sudo(OAR_USER)
        if not self.account:
            self.account = getpass.getuser()

    # ------------------------------------------------------------ observing

    def refresh(self) -> None:
        poll = self.ctl.poll()
        self._discover(poll)
        self.forget_ignored({j.job_id for j in poll.jobs})
        self._cancel_abandoned(poll)
        self._follow_all(poll, self.clock.now())
        self._poll.taken(poll)

    def _discover(self, poll: Poll) -> None:
        by_id = {j.job_id: j for j in poll.jobs}
        self._deleted &= by_id.keys()
        seen = discover((j for j in poll.jobs
                         if j.state_raw != "Finishing" and j.job_id not in self._deleted),
                        self.name, self.account)
        for oar_id, reason in seen.refused.items():
            self._ignore(by_id[oar_id], reason)
        self.found = {i: self._found(t, by_id[i]) for i, t in seen.found.items()
                      if i not in self.ignored}

    def _found(self, tagged: OarTagged, job: OarJob) -> Found:
        running = job.holds_nodes
        nodes = len(job.nodes) if running else job.resources or tagged.tag.min_size
        return Found(tagged.job_id, self.name, tagged.oar_id, tagged.user, tagged.tag, nodes,
                     running, tagged.held)

    def _ignore(self, job: OarJob, reason: str) -> None:
        if job.job_id not in self.ignored:
            self.ignored[job.job_id] = reason
            logger.warning("event=tag_ignored site=%s oar_id=%d user=%s reason=%r",
                           self.name, job.job_id, job.owner or "?", reason)

    def forget_ignored(self, seen: set[int]) -> None:
        """Drop refused tags of jobs that have left the queue (memory stays flat)."""
        for oar_id in [i for i in self.ignored if i not in seen]:
            del self.ignored[oar_id]

    def _running(self, job: OarJob, mine: _Mine | None) -> RunningJob:
        """A running job; the service's own at its fixed size unless its agent is connected
        (nothing else can resize it)."""
        entry = super()._running(job, mine)
        if not entry.managed or (mine is not None and self._session(mine) is not None):
            return entry
        size = entry.size
        fixed = replace(entry.spec, kind=JobKind.RIGID, min_size=size, max_size=size,
                        initial_size=size, preferred_size=None)
        return replace(entry, spec=fixed)

    def _adopt_orphans(self, poll: Poll) -> None:
        """Extension jobs of the service's jobs that the poll shows and that are not known
        yet (an ``extend`` whose answer was lost, a restart): the job's user's jobs named
        :func:`~malleable.site.oaragent.extension_name` of its base job."""
        names = {extension_name(m.base): m for m in self._mine.values()
                 if not m.finished and m.base is not None}
        known = {e for m in self._mine.values() for e in (*m.extensions, *m.released)}
        for job in poll.jobs:
            mine = names.get(job.name)
            if (mine is not None and job.owner == mine.spec.user and job.job_id not in known
                    and not job.state.finished):
                logger.info("event=extension_found site=%s job=%s oar_id=%d", self.name,
                            mine.spec.id, job.job_id)
                mine.extensions.append(job.job_id)
                self._journal_extensions(mine, added=[job.job_id])

    def _session(self, mine: _Mine) -> Session | None:
        """The job's agent, if it is connected."""
        if self.channel is None or mine.base is None:
            return None
        return self.channel.session(self.name, mine.base)

    def _tell_size(self, mine: _Mine, size: int) -> None:
        """The agent writes the job's ``nodes`` and ``size`` files (no agent: nothing)."""
        session = self._session(mine)
        if session is None or mine.base is None or self._is_mpi(mine.spec.id):
            return  # an --mpi job's runner keeps its own nodes file
        try:
            jobs = {j.job_id: j for j in self.ctl.jobs([mine.base, *mine.extensions])}
            nodes = [n for i in (mine.base, *mine.extensions) if i in jobs
                     and jobs[i].state_raw == "Running" for n in jobs[i].nodes]
            listing, count = size_text(nodes)
            session.call("write", path=f"{session.run_dir}/nodes", text=listing)
            session.call("write", path=f"{session.run_dir}/size", text=count)
        except (ChannelError, ExternalError) as exc:
            logger.warning("event=size_not_told site=%s job=%s size=%d reason=%r", self.name,
                           mine.spec.id, size, str(exc)[:200])

    # ------------------------------------------------------------ acting

    def copy_of(self, job_id: str) -> Found | None:
        """This site's waiting copy of a job, if the last poll showed one."""
        return next((f for f in self.found.values() if f.job_id == job_id and not f.running),
                    None)

    def start(self, spec: JobSpec, size: int) -> int:
        """Resume this site's held copy of ``spec`` (0: no copy here, or ``size`` is less
        than the copy's submitted size, which OAR cannot change)."""
        copy = self.copy_of(spec.id)
        if copy is None or size < 1:
            return 0
        if size < copy.nodes:
            if spec.id not in self._too_small:
                self._too_small.add(spec.id)
                logger.info("event=place_deferred site=%s job=%s oar_id=%d reason='OAR starts "
                            "it at its %d submitted nodes; %d offered'", self.name, spec.id,
                            copy.slurm_id, copy.nodes, size)
            return 0
        if copy.held:
            result = self.ctl.resume(copy.slurm_id)
            if result.rc != 0:
                logger.warning("event=place_refused site=%s job=%s oar_id=%d reason=%r",
                               self.name, spec.id, copy.slurm_id,
                               (result.stdout + result.stderr).strip()[:200])
                return 0
        self._stale()
        self._too_small.discard(spec.id)
        if copy.tag.mpi:
            self._mpi.add(spec.id)
        self.adopt(spec, copy.slurm_id, requested=copy.nodes)
        if self.journal is not None:
            self.journal.native_submitted(self.name, spec.id, copy.native_id)
        del self.found[copy.slurm_id]
        self.placements += 1
        logger.info("event=placed site=%s job=%s oar_id=%d nodes=%d", self.name, spec.id,
                    copy.slurm_id, copy.nodes)
        return copy.nodes

    def _agent_of(self, job_id: str) -> tuple[_Mine, Session] | None:
        """A running malleable job of the service and its connected agent (None: no resize;
        a missing agent is logged once)."""
        mine = self._resizable(job_id)
        if mine is None:
            return None
        session = self._session(mine)
        if session is None:
            if job_id not in self._no_agent:
                self._no_agent.add(job_id)
                logger.warning("event=oar_no_agent site=%s job=%s oar_id=%s reason='its agent "
                               "has not connected: not resized'", self.name, job_id, mine.base)
            return None
        self._no_agent.discard(job_id)
        return mine, session

    def offer_grow(self, job_id: str, offer: int) -> int:
        """Extension jobs through the job's agent (``extend``), waited on; those OAR does
        not run in time are released and not counted. The nodes now running."""
        found = self._agent_of(job_id) if offer > 0 else None
        if found is None:
            return 0
        mine, session = found
        if self._is_mpi(job_id):
            return self._mpi_resize(mine, session, mine.spec.accepts(mine.size, offer))
        accepted = mine.spec.accepts(mine.size, offer)
        if accepted <= 0:
            return 0
        decided, began = time.time(), time.monotonic()
        self._stale()
        try:
            new = [int(i) for i in session.call("extend", count=accepted).get("ids", ())]
        except (ChannelError, ValueError, TypeError) as exc:
            logger.warning("event=grow_failed site=%s job=%s reason=%r", self.name, job_id,
                           str(exc)[:200])
            return 0
        self._journal_extensions(mine, added=new)  # before the wait: a restart may come
        wait = self.grow_wait + self.grow_wait_per_node * len(new)
        running = self._await_running(new, wait)
        late = [e for e in new if e not in running]
        if late:
            self._release_late(session, mine, late, wait)
        mine.extensions.extend(running)
        if running:
            mine.size += len(running)
            self._emit(mine, JobEvent(self.clock.now(), job_id, JobState.RUNNING, mine.size))
        logger.info("event=grown site=%s job=%s oar_ids=%s size=%d decided=%.3f seconds=%.2f",
                    self.name, job_id, ",".join(map(str, running)), mine.size, decided,
                    time.monotonic() - began)
        return len(running)

    def _release_late(self, session: Session, mine: _Mine, late: list[int],
                      wait: float) -> None:
        logger.warning("event=grow_late site=%s job=%s late=%d of_wait=%.0f", self.name,
                       mine.spec.id, len(late), wait)
        try:
            session.call("release", ids=late)
        except ChannelError as exc:  # they must not stay: deleted as oar
            logger.warning("event=release_failed site=%s job=%s reason=%r; deleting as oar",
                           self.name, mine.spec.id, str(exc)[:200])
            self.ctl.delete(late)
        mine.released.extend(late)
        self._journal_extensions(mine, released=late)

    def request_shrink(self, job_id: str, amount: int, mandatory: bool) -> int:
        """Release the newest extension jobs through the agent (never the base job)."""
        found = self._agent_of(job_id) if amount > 0 else None
        if found is None:
            return 0
        mine, session = found
        released = min(mine.spec.releases(mine.size, amount), len(mine.extensions))
        if released <= 0:
            return 0
        if self._is_mpi(job_id):
            return -self._mpi_resize(mine, session, -released, mandatory)
        decided, began = time.time(), time.monotonic()
        self._stale()
        gone = mine.extensions[-released:]
        try:
            session.call("release", ids=gone)
        except ChannelError as exc:
            logger.warning("event=shrink_failed site=%s job=%s reason=%r", self.name, job_id,
                           str(exc)[:200])
            return 0
        self._released(mine, gone)
        mine.size -= released
        self._emit(mine, JobEvent(self.clock.now(), job_id, JobState.RUNNING, mine.size))
        logger.info("event=shrunk site=%s job=%s oar_ids=%s size=%d decided=%.3f seconds=%.2f",
                    self.name, job_id, ",".join(map(str, gone)), mine.size, decided,
                    time.monotonic() - began)
        return released

    # ------------------------------------------------------------ MPI jobs

    def _is_mpi(self, job_id: str) -> bool:
        return job_id in self._mpi or any(f.job_id == job_id and f.tag.mpi
                                          for f in self.found.values())

    def _mpi_job(self, mine: _Mine, session: Session) -> AgentOarMpiJob | None:
        """The job's runner state over its agent (None: the program has not started)."""
        assert mine.base is not None  # _resizable checked
        job = self.mpi_jobs.get(mine.spec.id)
        if job is None or job.session is not session:
            wait = self.grow_wait + self.grow_wait_per_node * mine.spec.max_size
            job = agent_mpi_job(self.ctl, session, mine.base, max(MPI_GROW_WAIT, wait))
            if mine.extensions:  # a new session (a restart): its extensions by node
                for ext in self.ctl.jobs(mine.extensions):
                    if ext.state_raw == "Running" and ext.nodes:
                        job.extensions[ext.nodes[0]] = ext.job_id
            self.mpi_jobs[mine.spec.id] = job
        return job if job.poll_started() else None

    def _mpi_resize(self, mine: _Mine, session: Session, delta: int,
                    mandatory: bool = False) -> int:
        """Grow (``delta`` > 0) or shrink an ``--mpi`` job by the runner's logic over its
        agent; the nodes it changed by."""
        job_id, before, extensions = mine.spec.id, mine.size, list(mine.extensions)
        if delta == 0:
            return 0
        decided, began = time.time(), time.monotonic()
        self._stale()
        job = None
        try:
            job = self._mpi_job(mine, session)
            if job is None:
                logger.info("event=mpi_not_started site=%s job=%s", self.name, job_id)
                return 0
            change = job.grow(delta) if delta > 0 else job.shrink(-delta, mandatory)
            job.shell.write(job.batch, f"{job.run_dir}/nodes",
                            "".join(f"{n} {h}\n" for n, h in job.nodes))
        except (ChannelError, ExternalError, ValueError) as exc:
            logger.warning("event=mpi_resize_failed site=%s job=%s reason=%r", self.name,
                           job_id, str(exc)[:200])
            change = Change(before, before, before, time.monotonic() - began, str(exc))
        if job is not None:
            self._take_extensions(mine, job)
        after = before + len(mine.extensions) - len(extensions)
        changed = [e for e in mine.extensions if e not in extensions] + [
            e for e in extensions if e not in mine.extensions]
        if after != before:
            mine.size = after
            self._emit(mine, JobEvent(self.clock.now(), job_id, JobState.RUNNING, after))
        logger.info("event=mpi_resized site=%s job=%s processes=%d->%d size=%d->%d "
                    "oar_ids=%s decided=%.3f seconds=%.2f%s", self.name, job_id,
                    change.before, change.after, before, after,
                    ",".join(map(str, changed)) or "-", decided, time.monotonic() - began,
                    f" error={change.error!r}" if change.error else "")
        return after - before

    def _take_extensions(self, mine: _Mine, job: AgentOarMpiJob) -> None:
        """The job's extensions as the runner left them: the live ones the job's, those it
        deleted released (so that OAR still listing them is never taken for live)."""
        added = [e for e in job.extensions.values() if e not in mine.extensions]
        if added:
            mine.extensions.extend(added)
            self._journal_extensions(mine, added=added)
        gone = [e for e in job.deleted if e not in mine.released]
        if gone:
            self._released(mine, gone)

    def cancel_copy(self, oar_id: int) -> None:
        """Delete a user's waiting copy placed on another site (``oardel`` as ``oar``)."""
        self._stale()
        result = self.ctl.delete([oar_id])
        self.found.pop(oar_id, None)
        if result.rc != 0:
            logger.warning("event=copy_cancel_failed site=%s oar_id=%d reason=%r", self.name,
                           oar_id, (result.stdout + result.stderr).strip()[:200])
            return
        self._deleted.add(oar_id)
        logger.info("event=copy_cancelled site=%s oar_id=%d", self.name, oar_id)

    def owner(self, oar_id: int) -> tuple[str, bool] | None:
        """A tagged job's owner (oarstat's) and whether it runs an agent (its range is not
        a single size, or it is an ``--mpi`` job); None: not a tagged job of this site."""
        found = self.found.get(oar_id)
        if found is not None:
            return found.user, found.tag.max_size > found.tag.min_size or found.tag.mpi
        mine = next((m for m in self._mine.values() if m.base == oar_id and not m.finished),
                    None)
        if mine is None or not mine.spec.user:
            return None
        return mine.spec.user, (mine.spec.max_size > mine.spec.min_size
                                or self._is_mpi(mine.spec.id))

    def forget(self, job_ids: Iterable[str]) -> None:
        """Stop keeping finished jobs (the journal keeps them all)."""
        gone = set(job_ids)
        for job_id in gone:
            mine = self._mine.get(job_id)
            if mine is not None and mine.finished:
                del self._mine[job_id]
            self._too_small.discard(job_id)
            self._no_agent.discard(job_id)
            self._mpi.discard(job_id)
            self.mpi_jobs.pop(job_id, None)
        self.node_failures = [e for e in self.node_failures if e.get("job") not in gone]
