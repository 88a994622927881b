"""An OAR site of the site service: users' held tagged jobs, resumed where the policy
places them (docs/oar.md, "The site service on OAR").

:class:`SiteOar` wraps the OAR adapter (:class:`~malleable.adapters.oar.cluster.OarCluster`:
the same one-call poll, ``oarnodes -J`` then ``oarstat -J``, the same events and end
states), implements the service's :class:`~malleable.site.port.ServiceSite` by delegating
to it, and adds, through the adapter's public hooks
(:class:`~malleable.adapters.oar.cluster.OarHooks`) and its public collection API:

* **Discovery.** Each poll is scanned for jobs of any user whose name is a compact tag
  (:func:`malleable.site.oarjobs.discover`; the owner is oarstat's ``owner``); each becomes
  a :class:`~malleable.site.port.Found`, as on every kind of site. A name that claims to be a tag
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

from malleable.adapters.oar.cluster import Collection, NativeJournal, OarCluster
from malleable.adapters.oar.ctl import OarCtl, Poll
from malleable.adapters.oar.parse import OarJob
from malleable.adapters.outcomes import ResizeResult
from malleable.errors import ExternalError
from malleable.model import JobKind, JobSpec, RunningJob
from malleable.runner.job import Change
from malleable.site.channel import ChannelError, Session
from malleable.site.oaragent import extension_name, size_text
from malleable.site.oarjobs import OarTagged, discover
from malleable.site.oarmpi import AgentOarMpiJob, agent_mpi_job
from malleable.site.port import Found, WrappedSite

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
class SiteOar(WrappedSite[OarCluster]):
    """An OAR site of the site service (see the module docstring): it holds its OAR
    adapter (:attr:`cluster`) and is that adapter's :attr:`~OarCluster.hooks`."""

    kind: ClassVar[str] = "oar"
    id_key: ClassVar[str] = "oar_id"
    """How log lines and ``manager status`` name a job's id on this site."""

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
        if self.cluster.hooks is not None:
            raise ValueError(f"site {self.cluster.name}: its OAR adapter has hooks already")
        self.cluster.hooks = self
        if self.cluster.ctl.sudo_to is None:
            self.cluster.ctl = self.cluster.ctl.via_sudo(OAR_USER)
        if not self.account:
            self.account = getpass.getuser()

    # ------------------------------------------------------------ the adapter's

    @property
    def ctl(self) -> OarCtl:
        return self.cluster.ctl

    @property
    def journal(self) -> NativeJournal | None:
        return self.cluster.journal

    @property
    def grow_wait(self) -> float:
        return self.cluster.grow_wait

    @property
    def grow_wait_per_node(self) -> float:
        return self.cluster.grow_wait_per_node

    # ------------------------------------------------------------ the hooks

    def polled(self, poll: Poll) -> None:
        """Each poll (the adapter's hook): find the tagged user jobs."""
        self._discover(poll)
        self.forget_ignored({j.job_id for j in poll.jobs})

    def running(self, entry: RunningJob, base: int | None) -> RunningJob:
        """A running job (the adapter's hook); the service's own at its fixed size unless
        its agent is connected (nothing else can resize it)."""
        if not entry.managed or (base is not None and self._session_of(base) is not None):
            return entry
        size = entry.size
        fixed = replace(entry.spec, kind=JobKind.RIGID, min_size=size, max_size=size,
                        initial_size=size, preferred_size=None)
        return replace(entry, spec=fixed)

    def extensions(self, spec: JobSpec, base: int) -> tuple[str, str]:
        """The extension jobs of the service's jobs (the adapter's hook): the job's user's
        jobs named :func:`~malleable.site.oaragent.extension_name` of its base job (an
        ``extend`` whose answer was lost, a restart)."""
        return extension_name(base), spec.user

    # ------------------------------------------------------------ observing

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

    def _session(self, mine: Collection) -> Session | None:
        """The job's agent, if it is connected."""
        return None if mine.base is None else self._session_of(mine.base)

    def _session_of(self, base: int) -> Session | None:
        """The agent of the job whose base job is ``base``, if it is connected."""
        if self.channel is None:
            return None
        return self.channel.session(self.name, base)

    def tell_size(self, mine: Collection, size: int) -> None:
        """The agent writes the job's ``nodes`` and ``size`` files (the adapter's hook; no
        agent: nothing)."""
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
                            copy.native_id, copy.nodes, size)
            return 0
        if copy.held:
            result = self.ctl.resume(copy.native_id)
            if result.rc != 0:
                logger.warning("event=place_refused site=%s job=%s oar_id=%d reason=%r",
                               self.name, spec.id, copy.native_id,
                               (result.stdout + result.stderr).strip()[:200])
                return 0
        self.cluster.invalidate()
        self._too_small.discard(spec.id)
        if copy.tag.mpi:
            self._mpi.add(spec.id)
        self.cluster.adopt(spec, copy.native_id, requested=copy.nodes)
        if self.journal is not None:
            self.journal.native_submitted(self.name, spec.id, copy.native_id)
        del self.found[copy.native_id]
        self.placements += 1
        logger.info("event=placed site=%s job=%s oar_id=%d nodes=%d", self.name, spec.id,
                    copy.native_id, copy.nodes)
        return copy.nodes

    def _agent_of(self, job_id: str) -> tuple[Collection, Session] | None:
        """A running malleable job of the service and its connected agent (None: no resize;
        a missing agent is logged once)."""
        mine = self.cluster.resizable(job_id)
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
        self.cluster.invalidate()
        try:
            new = [int(i) for i in session.call("extend", count=accepted).get("ids", ())]
        except (ChannelError, ValueError, TypeError) as exc:
            logger.warning("event=grow_failed site=%s job=%s reason=%r", self.name, job_id,
                           str(exc)[:200])
            return 0
        self.cluster.journal_extensions(mine, added=new)  # before the wait: a restart may come
        wait = self.grow_wait + self.grow_wait_per_node * len(new)
        running = self.cluster.await_running(new, wait)
        late = [e for e in new if e not in running]
        if late:
            self._release_late(session, mine, late, wait)
        self.cluster.extended(mine, running)
        if running:
            self.cluster.resized(mine, mine.size + len(running))
        logger.info("event=grown site=%s job=%s oar_ids=%s size=%d decided=%.3f seconds=%.2f",
                    self.name, job_id, ",".join(map(str, running)), mine.size, decided,
                    time.monotonic() - began)
        return len(running)

    def _release_late(self, session: Session, mine: Collection, late: list[int],
                      wait: float) -> None:
        logger.warning("event=grow_late site=%s job=%s late=%d of_wait=%.0f", self.name,
                       mine.spec.id, len(late), wait)
        try:
            session.call("release", ids=late)
        except ChannelError as exc:  # they must not stay: deleted as oar
            logger.warning("event=release_failed site=%s job=%s reason=%r; deleting as oar",
                           self.name, mine.spec.id, str(exc)[:200])
            self.ctl.delete(late)
        self.cluster.released(mine, late)  # never the job's: not in its extensions

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
        self.cluster.invalidate()
        gone = mine.extensions[-released:]
        try:
            session.call("release", ids=gone)
        except ChannelError as exc:
            logger.warning("event=shrink_failed site=%s job=%s reason=%r", self.name, job_id,
                           str(exc)[:200])
            return 0
        self.cluster.released(mine, gone)
        self.cluster.resized(mine, mine.size - released)
        logger.info("event=shrunk site=%s job=%s oar_ids=%s size=%d decided=%.3f seconds=%.2f",
                    self.name, job_id, ",".join(map(str, gone)), mine.size, decided,
                    time.monotonic() - began)
        return released

    # ------------------------------------------------------------ MPI jobs

    def _is_mpi(self, job_id: str) -> bool:
        return job_id in self._mpi or any(f.job_id == job_id and f.tag.mpi
                                          for f in self.found.values())

    def _mpi_job(self, mine: Collection, session: Session) -> AgentOarMpiJob | None:
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

    def _mpi_resize(self, mine: Collection, session: Session, delta: int,
                    mandatory: bool = False) -> int:
        """Grow (``delta`` > 0) or shrink an ``--mpi`` job by the runner's logic over its
        agent; the nodes it changed by."""
        job_id, before, extensions = mine.spec.id, mine.size, list(mine.extensions)
        if delta == 0:
            return 0
        decided, began = time.time(), time.monotonic()
        self.cluster.invalidate()
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
            self.cluster.resized(mine, after)
        logger.info("event=mpi_resized site=%s job=%s processes=%d->%d size=%d->%d "
                    "oar_ids=%s decided=%.3f seconds=%.2f%s", self.name, job_id,
                    change.before, change.after, before, after,
                    ",".join(map(str, changed)) or "-", decided, time.monotonic() - began,
                    f" error={change.error!r}" if change.error else "")
        return after - before

    def _take_extensions(self, mine: Collection, job: AgentOarMpiJob) -> None:
        """The job's extensions as the runner left them: the live ones the job's, those it
        deleted released (so that OAR still listing them is never taken for live)."""
        added = [e for e in job.extensions.values() if e not in mine.extensions]
        if added:
            self.cluster.extended(mine, added)
            self.cluster.journal_extensions(mine, added=added)
        gone = [e for e in job.deleted if e not in mine.released]
        if gone:
            self.cluster.released(mine, gone)

    def cancel_copy(self, oar_id: int) -> None:
        """Delete a user's waiting copy placed on another site (``oardel`` as ``oar``)."""
        self.cluster.invalidate()
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
        mine = self.cluster.of_base(oar_id)
        if mine is None or not mine.spec.user:
            return None
        return mine.spec.user, (mine.spec.max_size > mine.spec.min_size
                                or self._is_mpi(mine.spec.id))

    def forget(self, job_ids: Iterable[str]) -> None:
        """Stop keeping finished jobs (the journal keeps them all)."""
        gone = set(job_ids)
        for job_id in gone:
            self._too_small.discard(job_id)
            self._no_agent.discard(job_id)
            self._mpi.discard(job_id)
            self.mpi_jobs.pop(job_id, None)
        self.cluster.forget(gone)
