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
* **No resizes yet.** Grow and shrink on OAR need the job's own agent to submit and delete
  extension jobs as the user (docs/notes/issue-15-serve-design.md, point 3), which is not
  built: :attr:`capabilities` is empty, and the view shows the service's running jobs at
  their fixed size (rigid), so no policy offers them a grow or asks a shrink.
* **Nothing written.** The service never submits a job nor writes a file on the site (the
  manager-run adapter writes its payload's size file; a user's job has no such file).
"""

from __future__ import annotations

import getpass
import logging
from collections.abc import Iterable
from dataclasses import dataclass, field, replace

from malleable.adapters.oar.cluster import OarCluster, _Mine
from malleable.adapters.oar.ctl import Poll
from malleable.adapters.oar.parse import OarJob
from malleable.adapters.slurm.resize import ResizeResult
from malleable.model import JobKind, JobSpec, RunningJob
from malleable.resources import Capability
from malleable.site.adapter import Found
from malleable.site.channel import ChannelServer
from malleable.site.oarjobs import OarTagged, discover

logger = logging.getLogger(__name__)

#: The user the service's ``oarresume`` and ``oardel`` run as (through sudo).
OAR_USER = "oar"


@dataclass
class SiteOar(OarCluster):
    """An OAR site of the site service (see the module docstring)."""

    capabilities: frozenset[Capability] = frozenset()
    account: str = ""
    """The service's OAR user (default: this process's user); its own jobs are not users'."""
    found: dict[int, Found] = field(default_factory=dict)
    """Tagged user jobs of the last poll, by OAR id."""
    ignored: dict[int, str] = field(default_factory=dict)
    """Jobs whose tag was refused (logged once), with the reason."""
    placements: int = 0
    """Held copies resumed since the service last counted them."""
    channel: ChannelServer | None = None
    """Kept for the service's sake: no job of an OAR site uses the channel yet."""
    resizes: list[ResizeResult] = field(default_factory=list)
    """Always empty: the service does not resize OAR jobs yet."""
    _too_small: set[str] = field(default_factory=set)

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
        seen = discover((j for j in poll.jobs if j.state_raw != "Finishing"), self.name,
                        self.account)
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
        """A running job; the service's own at its fixed size (nothing resizes it here)."""
        entry = super()._running(job, mine)
        if not entry.managed:
            return entry
        size = entry.size
        fixed = replace(entry.spec, kind=JobKind.RIGID, min_size=size, max_size=size,
                        initial_size=size, preferred_size=None)
        return replace(entry, spec=fixed)

    def _adopt_orphans(self, poll: Poll) -> None:
        """Nothing: the service submits no extension job (a user's job named like one
        is not taken for one)."""

    def _tell_size(self, mine: _Mine, size: int) -> None:
        """Nothing: a user's job has no size file (the service writes nothing)."""

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
        self.adopt(spec, copy.slurm_id, requested=copy.nodes)
        if self.journal is not None:
            self.journal.slurm_submitted(self.name, spec.id, copy.slurm_id)
        del self.found[copy.slurm_id]
        self.placements += 1
        logger.info("event=placed site=%s job=%s oar_id=%d nodes=%d", self.name, spec.id,
                    copy.slurm_id, copy.nodes)
        return copy.nodes

    def cancel_copy(self, oar_id: int) -> None:
        """Delete a user's waiting copy placed on another site (``oardel`` as ``oar``)."""
        self._stale()
        result = self.ctl.delete([oar_id])
        self.found.pop(oar_id, None)
        if result.rc != 0:
            logger.warning("event=copy_cancel_failed site=%s oar_id=%d reason=%r", self.name,
                           oar_id, (result.stdout + result.stderr).strip()[:200])
            return
        logger.info("event=copy_cancelled site=%s oar_id=%d", self.name, oar_id)

    def slurm_id(self, job_id: str) -> int | None:
        """The OAR id of a job this site runs (the service's name for a native id)."""
        return self.native_id(job_id)

    def owner(self, oar_id: int) -> tuple[str, bool] | None:
        """None: no job of an OAR site has an application channel yet."""
        return None

    def forget(self, job_ids: Iterable[str]) -> None:
        """Stop keeping finished jobs (the journal keeps them all)."""
        gone = set(job_ids)
        for job_id in gone:
            mine = self._mine.get(job_id)
            if mine is not None and mine.finished:
                del self._mine[job_id]
            self._too_small.discard(job_id)
        self.node_failures = [e for e in self.node_failures if e.get("job") not in gone]
