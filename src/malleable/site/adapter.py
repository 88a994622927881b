"""A Slurm site whose managed jobs are ordinary users' tagged jobs (the site service).

:class:`SiteSlurm` wraps the Slurm adapter (:class:`~malleable.adapters.slurm.cluster.
SlurmCluster`: the same poll, events, and confirmed resize protocol), implements the
service's :class:`~malleable.site.port.ServiceSite` by delegating to it, and adds, through
the adapter's public hooks (:class:`~malleable.adapters.slurm.cluster.SlurmHooks`):

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
* **MPI jobs.** A job tagged ``"mpi": true`` is resized only through its application
  channel (:mod:`malleable.site.channel`): the runner's
  :class:`~malleable.runner.job.MpiJob` protocol (expand, stage, offer, answer, give
  back) with every file and node operation done by the job's own agent, as its user.
  Without an open channel such a job is not resized (logged once). With
  :attr:`negotiations` (the service sets them) the program's answer is awaited in a
  worker: ``offer_grow``/``request_shrink`` answer :data:`~malleable.resources.PENDING`
  and the result comes back as a job event.
"""

from __future__ import annotations

import getpass
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import ClassVar

import malleable.adapters.slurm.meta as meta
from malleable.adapters.outcomes import Outcome, ResizeResult
from malleable.adapters.pending import Negotiations
from malleable.adapters.slurm.cluster import SiteJournal, SlurmCluster
from malleable.adapters.slurm.ctl import Poll, SlurmCtl
from malleable.adapters.slurm.parse import SlurmJob, holds_nodes
from malleable.adapters.slurm.resize import Resizer
from malleable.errors import ExternalError
from malleable.model import JobSpec, JobState
from malleable.runner.job import Change, MpiJob
from malleable.runner.launch import Launch
from malleable.site import tag as tags
from malleable.site.channel import ChannelError, RelayShell
from malleable.site.port import Found as Found  # re-exported (its old home)
from malleable.site.port import WrappedSite
from malleable.site.port import service_id as service_id

logger = logging.getLogger(__name__)

#: Slurm reasons of a job held by its user or an administrator.
HELD_REASONS = frozenset({"JobHeldUser", "JobHeldAdmin"})
#: The reason of a job an administrator held: the service never releases it.
ADMIN_HOLD = "JobHeldAdmin"


@dataclass
class SiteSlurm(WrappedSite[SlurmCluster]):
    """A Slurm site of the site service (see the module docstring): it holds its Slurm
    adapter (:attr:`cluster`) and is that adapter's :attr:`~SlurmCluster.hooks`."""

    kind: ClassVar[str] = "slurm"
    id_key: ClassVar[str] = "slurm_id"
    """How log lines and ``manager status`` name a job's id on this site."""
    admin_held: dict[int, str] = field(default_factory=dict)
    """Tagged jobs an administrator holds (left alone, logged once), by id: the owner."""
    mpi_jobs: dict[str, MpiJob] = field(default_factory=dict)
    _no_channel: set[str] = field(default_factory=set)

    def __post_init__(self) -> None:
        if self.cluster.hooks is not None:
            raise ValueError(f"site {self.cluster.name}: its Slurm adapter has hooks already")
        self.cluster.hooks = self
        if not self.account:
            self.account = self.ctl.user or getpass.getuser()

    # ------------------------------------------------------------ the adapter's

    @property
    def resizes(self) -> list[ResizeResult]:
        return self.cluster.resizes

    @resizes.setter
    def resizes(self, value: list[ResizeResult]) -> None:
        self.cluster.resizes = value

    @property
    def ctl(self) -> SlurmCtl:
        return self.cluster.ctl

    @property
    def journal(self) -> SiteJournal | None:
        return self.cluster.journal

    @property
    def resizer(self) -> Resizer | None:
        return self.cluster.resizer

    @property
    def negotiations(self) -> Negotiations | None:
        return self.cluster.negotiations

    @property
    def missing(self) -> Mapping[str, str]:
        return self.cluster.missing

    def size_of(self, job_id: str) -> int | None:
        return self.cluster.size_of(job_id)

    def resume_intent(self, token: int, kind: str, job_id: str, native_id: int | None) -> None:
        self.cluster.resume_intent(token, kind, job_id, native_id)

    # ------------------------------------------------------------ the hooks

    def polled(self, poll: Poll) -> Poll:
        """Each poll (the adapter's hook): find the tagged user jobs; the part of ``poll``
        that may be the service's own (forgeries of its internal tag left out)."""
        self._discover(poll)
        self.forget_ignored({j.job_id for j in poll.jobs})
        return Poll(tuple(j for j in poll.jobs if self._own(j)), poll.nodes)

    def unsaveable(self, job_id: str) -> str:
        """Why a job that lost nodes cannot shed them (the adapter's hook)."""
        if self._is_mpi(job_id):  # its ranks there died with the node
            return "an --mpi job lost ranks with the node: Slurm ends it NODE_FAIL"
        return ""

    # ------------------------------------------------------------ observing

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
            if self._admin_held(job):
                continue
            found[job.job_id] = Found(service_id(job.user, self.name, job.job_id, tag.sub),
                                      self.name, job.job_id, job.user, tag, job.nodes,
                                      running, job.reason in HELD_REASONS)
        self.found = found

    def _admin_held(self, job: SlurmJob) -> bool:
        """Whether an administrator holds ``job`` (logged once): never released here."""
        if job.reason != ADMIN_HOLD:
            self.admin_held.pop(job.job_id, None)
            return False
        if job.job_id not in self.admin_held:
            self.admin_held[job.job_id] = job.user
            logger.warning("event=admin_hold site=%s slurm_id=%d user=%s reason='held by an "
                           "administrator: left held'", self.name, job.job_id, job.user)
        return True

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
        self.cluster.invalidate()
        update = self.ctl.update_nodes(copy.native_id, str(size))
        if update.rc != 0:
            logger.warning("event=place_refused site=%s job=%s slurm_id=%d reason=%r",
                           self.name, spec.id, copy.native_id, update.stderr.strip()[:200])
            return 0
        if copy.held:
            now_seen = self.ctl.show_job(copy.native_id)  # an administrator may have held it
            if now_seen is not None and self._admin_held(now_seen):
                return 0
            release = self.ctl.release(copy.native_id)
            if release.rc != 0:
                raise ExternalError(f"scontrol release {copy.native_id}: "
                                    f"{release.stderr.strip()[:200]}")
        self.cluster.adopt(spec, copy.native_id, requested=size)
        if self.journal is not None:
            self.journal.slurm_submitted(self.name, spec.id, copy.native_id)
        del self.found[copy.native_id]
        self.placements += 1
        logger.info("event=placed site=%s job=%s slurm_id=%d nodes=%d", self.name, spec.id,
                    copy.native_id, size)
        return size

    def cancel_copy(self, slurm_id: int) -> None:
        """Cancel a user's waiting copy placed on another site (as the operator)."""
        self.cluster.invalidate()
        self.ctl.cancel(slurm_id)
        self.found.pop(slurm_id, None)
        logger.info("event=copy_cancelled site=%s slurm_id=%d", self.name, slurm_id)

    def forget(self, job_ids: set[str]) -> None:
        """Stop keeping finished jobs: their state here and in the adapter (the journal
        keeps every failure)."""
        for job_id in job_ids:
            self.mpi_jobs.pop(job_id, None)
            self._no_channel.discard(job_id)
        self.cluster.forget(job_ids)

    def forget_ignored(self, seen: set[int]) -> None:
        """Drop refused tags of jobs that have left the queue (memory stays flat)."""
        for slurm_id in [i for i in self.ignored if i not in seen]:
            del self.ignored[slurm_id]
        for slurm_id in [i for i in self.admin_held if i not in seen]:
            del self.admin_held[slurm_id]

    # ------------------------------------------------------------ MPI jobs

    def owner(self, slurm_id: int) -> tuple[str, bool] | None:
        """A tagged job's owner and whether it is an ``--mpi`` job (None: not known)."""
        found = self.found.get(slurm_id)
        return None if found is None else (found.user, found.tag.mpi)

    def _is_mpi(self, job_id: str) -> bool:
        return any(f.job_id == job_id and f.tag.mpi for f in self.found.values())

    def offer_grow(self, job_id: str, offer: int) -> int:
        if not self._is_mpi(job_id):
            return self.cluster.offer_grow(job_id, offer)
        spec, size = self._resizable(job_id)
        if spec is None or offer <= 0:
            return 0
        delta = spec.accepts(size, offer)
        if self.negotiations is not None and delta > 0:
            return self.cluster.negotiate(job_id, "grow", delta,
                                          lambda: self._mpi_change(job_id, delta, False))
        return max(0, self._mpi_resize(job_id, delta))

    def request_shrink(self, job_id: str, amount: int, mandatory: bool) -> int:
        if not self._is_mpi(job_id):
            return self.cluster.request_shrink(job_id, amount, mandatory)
        spec, size = self._resizable(job_id)
        if spec is None or amount <= 0:
            return 0
        released = spec.releases(size, amount)
        if self.negotiations is not None and released > 0:
            return self.cluster.negotiate(job_id, "shrink", released,
                                          lambda: self._mpi_change(job_id, -released, mandatory))
        return max(0, -self._mpi_resize(job_id, -released, mandatory))

    def _resizable(self, job_id: str) -> tuple[JobSpec | None, int]:
        """A job the adapter may resize now, and its size (None, 0: not now)."""
        spec = self.cluster.resizable(job_id)
        return spec, self.cluster.size_of(job_id) or 0

    def _mpi_job(self, job_id: str, slurm_id: int) -> MpiJob | None:
        """The job's runner state over its open channel (None: no channel, not started)."""
        session = self.channel.session(self.name, slurm_id) if self.channel else None
        if session is None:
            if job_id not in self._no_channel:
                self._no_channel.add(job_id)
                logger.warning("event=mpi_no_channel site=%s job=%s slurm_id=%d reason='its "
                               "agent has not connected: not resized'", self.name, job_id,
                               slurm_id)
            return None
        self._no_channel.discard(job_id)
        job = self.mpi_jobs.get(job_id)
        if job is None or not isinstance(job.shell, RelayShell) or job.shell.session is not session:
            launch = Launch(session.program, "", workdir=os.path.dirname(session.run_dir))
            job = MpiJob(self.ctl, RelayShell(self.ctl.runner, session=session), launch,
                         self.resizer, answer_timeout=60.0, done_timeout=120.0,
                         slurm_id=slurm_id, seq=session.seq)
            self.mpi_jobs[job_id] = job
        return job if job.poll_started() else None

    def _mpi_resize(self, job_id: str, delta: int, mandatory: bool = False) -> int:
        """Grow (``delta`` > 0) or shrink an MPI job through its channel, answered at once
        (no negotiations): the nodes it changed by."""
        before = self.cluster.size_of(job_id) or 0
        after, _ = self._mpi_change(job_id, delta, mandatory)
        self.cluster.resized(job_id, after)
        return after - before

    def _mpi_change(self, job_id: str, delta: int, mandatory: bool) -> tuple[int, str]:
        """Resize an MPI job through its channel: its size after (nodes), and why it is
        not the size asked ("" if it is). In a worker when it is a pending negotiation
        (the adapter answers it with this)."""
        slurm_id, size = self.cluster.slurm_id(job_id), self.cluster.size_of(job_id)
        if slurm_id is None or size is None:
            return 0, "it is no longer running"
        if delta == 0:
            return size, "nothing to do"
        try:
            job = self._mpi_job(job_id, slurm_id)
        except (ChannelError, ExternalError, ValueError) as exc:
            logger.warning("event=mpi_channel_failed site=%s job=%s reason=%r", self.name,
                           job_id, str(exc)[:200])
            return size, f"application channel: {str(exc)[:200]}"
        if job is None:
            return size, "its agent has not connected, or the program has not started"
        before, target = size, size + delta
        token = None
        if self.journal is not None:
            token = self.journal.resize_begin(self.name, job_id, slurm_id, before, target)
        self.cluster.invalidate()
        try:
            change = job.grow(delta) if delta > 0 else job.shrink(-delta, mandatory)
            job.shell.write(job.batch, f"{job.run_dir}/nodes",
                            "".join(f"{n} {h}\n" for n, h in job.nodes))
        except (ChannelError, ExternalError) as exc:
            change = Change(before, job.size, len(job.nodes), 0.0, str(exc))
        after = change.nodes_after or before
        outcome = (Outcome.DONE if after == target else
                   Outcome.PARTIAL if after != before else Outcome.REFUSED)
        result = ResizeResult(slurm_id, before, target, after, outcome, change.error,
                              change.seconds)
        if self.journal is not None and token is not None:
            self.journal.resize_end(token, result)
        self.resizes.append(result)
        logger.info("event=mpi_resized site=%s job=%s processes=%d->%d nodes=%d->%d "
                    "outcome=%s%s", self.name, job_id, change.before, change.after, before,
                    after, outcome.value, f" error={change.error!r}" if change.error else "")
        return after, change.error
