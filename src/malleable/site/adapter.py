"""A Slurm site whose managed jobs are ordinary users' tagged jobs (the site service).

:class:`SiteSlurm` is the Slurm adapter (:class:`~malleable.adapters.slurm.cluster.
SlurmCluster`: the same poll, events, and confirmed resize protocol) with three
differences:

* **Discovery.** Each poll (the same single ``sinfo --json; squeue --json`` call) is
  scanned for jobs of any user whose comment is a user tag (:mod:`malleable.site.tag`);
  each becomes a :class:`Found` (pending or running). A malformed or hostile tag is
  logged once (one line) and the job is left alone as background load.
* **Owner.** Only jobs owned by the service account are read as the service's own
  internal tags (helper allocations of an expansion); a user's job carrying such a tag
  is a forgery: logged once, never bound, swept or cancelled.
* **Placement.** A user's job waits in Slurm held (``sbatch --hold``); ``start`` sets
  the size the policy chose (``scontrol update NumNodes``) and releases it
  (``scontrol release``), both as the operator account. The adapter never submits.
"""

from __future__ import annotations

import getpass
import logging
from dataclasses import dataclass, field

import malleable.adapters.slurm.meta as meta
from malleable.adapters.slurm.cluster import SlurmCluster
from malleable.adapters.slurm.ctl import Poll
from malleable.adapters.slurm.parse import SlurmJob, holds_nodes
from malleable.errors import ExternalError
from malleable.model import JobKind, JobSpec, JobState
from malleable.site import tag as tags

logger = logging.getLogger(__name__)

#: Slurm reasons of a job held by its user or an administrator.
HELD_REASONS = frozenset({"JobHeldUser", "JobHeldAdmin"})


@dataclass(frozen=True, slots=True)
class Found:
    """A tagged user job seen in this poll."""

    job_id: str
    """The service's id of the job: ``USER:SUB`` (``USER:SITE.SLURMID`` without ``sub``)."""
    site: str
    slurm_id: int
    user: str
    tag: tags.UserTag
    nodes: int
    running: bool
    held: bool

    def spec(self, now: float) -> JobSpec:
        """The job for the manager's queue (its initial size: Slurm's node count)."""
        initial = min(max(self.nodes, self.tag.min_size), self.tag.max_size)
        return JobSpec(self.job_id, JobKind.MALLEABLE, self.tag.min_size, self.tag.max_size,
                       initial, submit_time=max(0.0, now), app=self.tag.app,
                       preferred_size=self.tag.preferred, user=self.user)


def service_id(user: str, site: str, slurm_id: int, sub: str | None) -> str:
    """The service's id of a user job (copies of one submission share it)."""
    return f"{user}:{sub}" if sub else f"{user}:{site}.{slurm_id}"


@dataclass
class SiteSlurm(SlurmCluster):
    """A Slurm site of the site service (see the module docstring)."""

    account: str = ""
    """The service's Slurm user (default: the SSH user, or this process's user)."""
    found: dict[int, Found] = field(default_factory=dict)
    """Tagged user jobs of the last poll, by Slurm id."""
    ignored: dict[int, str] = field(default_factory=dict)
    """Jobs whose tag was refused (logged once), with the reason."""
    placements: int = 0
    """Held copies released since the service last counted them."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if not self.account:
            self.account = self.ctl.user or getpass.getuser()

    def refresh(self) -> None:
        poll = self.ctl.poll()
        now = self.clock.now()
        self._discover(poll)
        self.forget_ignored({j.job_id for j in poll.jobs})
        own = Poll(tuple(j for j in poll.jobs if self._own(j)), poll.nodes)
        self._bind(own)
        self._sweep(own)
        self._follow_all(poll, now)
        self._poll.taken(poll)

    def _own(self, job: SlurmJob) -> bool:
        """Whether a job may carry the service's internal tag (forgeries logged once)."""
        if job.user == self.account or not job.comment.startswith("{"):
            return True
        if meta.decode(job.comment) is not None:
            self._ignore(job, f"carries the service's internal tag but belongs to {job.user}")
            return False
        return True

    def _discover(self, poll: Poll) -> None:
        found: dict[int, Found] = {}
        for job in poll.jobs:
            if job.user == self.account or not tags.looks_like_tag(job.comment):
                continue
            if job.job_id in self.ignored or job.state.finished:
                continue
            if not job.user:
                self._ignore(job, "Slurm reports no owner")
                continue
            try:
                tag = tags.parse(job.comment, job.user)
            except tags.BadTag as exc:
                self._ignore(job, str(exc))
                continue
            running = holds_nodes(job) and not job.completing
            if job.state is not JobState.PENDING and not running:
                continue
            found[job.job_id] = Found(service_id(job.user, self.name, job.job_id, tag.sub),
                                      self.name, job.job_id, job.user, tag, job.nodes,
                                      running, job.reason in HELD_REASONS)
        self.found = found

    def _ignore(self, job: SlurmJob, reason: str) -> None:
        if job.job_id not in self.ignored:
            self.ignored[job.job_id] = reason
            logger.warning("event=tag_ignored site=%s slurm_id=%d user=%s reason=%r",
                           self.name, job.job_id, job.user or "?", reason)

    # ------------------------------------------------------------ acting

    def copy_of(self, job_id: str) -> Found | None:
        """This site's waiting copy of a job, if the last poll showed one."""
        return next((f for f in self.found.values() if f.job_id == job_id and not f.running),
                    None)

    def start(self, spec: JobSpec, size: int) -> int:
        """Release this site's held copy of ``spec`` at ``size`` nodes (0: no copy here)."""
        copy = self.copy_of(spec.id)
        if copy is None or size < 1:
            return 0
        self._stale()
        update = self.ctl.update_nodes(copy.slurm_id, str(size))
        if update.rc != 0:
            logger.warning("event=place_refused site=%s job=%s slurm_id=%d reason=%r",
                           self.name, spec.id, copy.slurm_id, update.stderr.strip()[:200])
            return 0
        if copy.held:
            release = self.ctl.release(copy.slurm_id)
            if release.rc != 0:
                raise ExternalError(f"scontrol release {copy.slurm_id}: "
                                    f"{release.stderr.strip()[:200]}")
        self.adopt(spec, copy.slurm_id, requested=size)
        if self.journal is not None:
            self.journal.slurm_submitted(self.name, spec.id, copy.slurm_id)
        del self.found[copy.slurm_id]
        self.placements += 1
        logger.info("event=placed site=%s job=%s slurm_id=%d nodes=%d", self.name, spec.id,
                    copy.slurm_id, size)
        return size

    def cancel_copy(self, slurm_id: int) -> None:
        """Cancel a user's waiting copy placed on another site (as the operator)."""
        self._stale()
        self.ctl.cancel(slurm_id)
        self.found.pop(slurm_id, None)
        logger.info("event=copy_cancelled site=%s slurm_id=%d", self.name, slurm_id)

    def forget(self, job_ids: set[str]) -> None:
        """Stop keeping finished jobs and refused tags no longer in the queue."""
        for job_id in job_ids:
            mine = self._mine.get(job_id)
            if mine is not None and mine.finished:
                del self._mine[job_id]
                if mine.slurm_id is not None:
                    self._by_slurm.pop(mine.slurm_id, None)

    def forget_ignored(self, seen: set[int]) -> None:
        """Drop refused tags of jobs that have left the queue (memory stays flat)."""
        for slurm_id in [i for i in self.ignored if i not in seen]:
            del self.ignored[slurm_id]
