"""Real views: a CooRM RMS over real sites, Slurm and OAR (the testbed's, or any configured).

* **Clusters**: one per configured site (its id is the site's name), with as many
  hosts as the site has nodes in service (minus its reserve), observed once through
  the site's adapter (:class:`~malleable.adapters.slurm.SlurmCluster` or
  :class:`~malleable.adapters.oar.cluster.OarCluster`) at start-up.
* **CAPs**: :class:`RealCapSource` polls each site whenever the policy runs (Slurm:
  ``sinfo``/``squeue`` in one call; OAR: ``oarnodes -J``/``oarstat -J`` in one call).
  A running job that CooRM did not start holds its nodes until its expected end:
  Slurm's ``EndTime`` (start + time limit), OAR's ``startTime`` + wall time
  (:mod:`malleable.coorm.oar_views`). Nodes that are neither idle nor held by a listed
  job (down, drained) count as taken until further notice. Jobs CooRM started are in
  its own books and are left out.
* **Starts**: when the core answers ``startNotify``, :class:`RealCoorm` submits one job
  per site of the allocation (:func:`site_sizes` maps the host ids to sites), with the
  host count and a time limit of the requested duration rounded up to whole minutes
  (Slurm: ``sbatch --exclusive --nodes``; OAR: ``oarsub -l nodes=N,walltime=...``).
  The job's script holds the allocation for the requested duration; a ``done`` or a
  kill cancels it. A submission the site refuses turns the start into a ``killNotify``.
"""

from __future__ import annotations

import logging
import math
import secrets
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace

from malleable.adapters.oar.cluster import OarCluster
from malleable.adapters.oar.ctl import OarCtl
from malleable.adapters.slurm import Payload, SlurmCluster
from malleable.adapters.slurm.ctl import Poll, SlurmCtl
from malleable.adapters.slurm.parse import holds_nodes
from malleable.clock import ScaledClock
from malleable.config import ClustersConfig, SiteConfig
from malleable.coorm.core import CooRMCore, CoreConfig, Outgoing
from malleable.coorm.oar_views import OarWalltimePayload, busy_from_oar_poll
from malleable.coorm.policy import Busy
from malleable.coorm.protocol import ClusterInfo, KillNotify, StartNotify
from malleable.coorm.resources import Platform, hierarchical_links
from malleable.coorm.sources import OVERRUN_GRACE
from malleable.errors import ExternalError
from malleable.kinds import Context, build, builder
from malleable.model import JobKind, JobSpec

logger = logging.getLogger(__name__)

#: How far the service clock may drift from the wall clock before CAPs are re-based.
STABLE_OFFSET = 1.0

#: The adapter of a site CooRM serves, by the site's kind.
RealSite = SlurmCluster | OarCluster
#: How CooRM reads one site (the registry's ``coorm_busy`` builder of its kind).
BusyReader = Callable[[str, RealSite, float, float, set[int]], list[Busy]]


@dataclass(frozen=True, slots=True)
class WalltimePayload(Payload):
    """The adapter's payload with the Slurm time limit set to the job's wall time."""

    def time_limit_minutes(self, spec: JobSpec) -> int:
        if spec.walltime is None:
            return Payload.time_limit_minutes(self, spec)
        return time_limit_minutes(spec.walltime)


def time_limit_minutes(seconds: float) -> int:
    """Slurm's ``--time`` in whole minutes, never below the requested seconds (>= 1)."""
    return max(1, math.ceil(seconds / 60.0 - 1e-9))


def site_sizes(rids: Mapping[str, Sequence[str]], sites: Sequence[str]) -> dict[str, int]:
    """Nodes to submit per site for a ``startNotify``'s host ids; ValueError if foreign.

    The core names host ``k`` of cluster ``c`` ``c-hKKKK``; the cluster is the site.
    """
    out: dict[str, int] = {}
    for cid, hosts in rids.items():
        if cid not in sites:
            raise ValueError(f"host ids of unknown site {cid!r}")
        strange = [h for h in hosts if not h.startswith(f"{cid}-h")]
        if strange:
            raise ValueError(f"host ids {strange} do not belong to site {cid!r}")
        if hosts:
            out[cid] = len(hosts)
    return out


def busy_from_poll(cid: str, poll: Poll, now: float, offset: float, *,
                   reserve: int = 0, partition: str | None = None,
                   managed: frozenset[int] | set[int] = frozenset()) -> list[Busy]:
    """Background occupancy of one polled site, in service time ``now`` (pure).

    ``offset`` is wall-clock time minus service time (an end in service time is
    ``end_time - offset``: computed from the offset alone, never as
    ``now + (end_time - wall_now)``, whose rounding moves the end by ~1e-7 s on each
    poll, which made every view "new" and kept every application from starting);
    ``managed`` are the Slurm ids of jobs CooRM itself submitted (left out: the
    core counts them).
    """
    nodes = [n for n in poll.nodes if partition is None or partition in n.partitions]
    out: list[Busy] = []
    listed = 0
    for job in poll.jobs:
        if partition is not None and job.partition and job.partition != partition:
            continue
        if not holds_nodes(job):  # a completing job's nodes count until its end
            continue
        listed += job.nodes
        if job.job_id in managed:
            continue
        end = math.inf if job.end_time is None else job.end_time - offset
        out.append(Busy(cid, job.nodes, end if end > now else now + OVERRUN_GRACE))
    in_service = sum(n.in_service for n in nodes)
    unexplained = in_service - reserve - sum(n.idle for n in nodes) - listed
    if unexplained > 0:  # down, drained, or held by jobs squeue does not list
        out.append(Busy(cid, unexplained, math.inf))
    return out


class RealCapSource:
    """A :class:`~malleable.coorm.sources.CapSource` reading real sites (module docstring)."""

    def __init__(self, sites: Mapping[str, RealSite],
                 epoch: Callable[[], float] = time.time) -> None:
        self.sites = dict(sites)
        self.managed: dict[str, set[int]] = {name: set() for name in self.sites}
        self._epoch = epoch
        self._offset: float | None = None

    def epoch_offset(self, now: float) -> float:
        """Wall-clock minus service time, kept while it drifts by less than a second.

        A fresh offset on every poll would move each background job's end by the
        jitter of the two clocks, and a view that changes on every policy run never
        lets an application start (its request is always on an older view).
        """
        fresh = self._epoch() - now
        if self._offset is None or abs(fresh - self._offset) > STABLE_OFFSET:
            self._offset = fresh
        return self._offset

    def clusters(self) -> tuple[ClusterInfo, ...]:
        """CINFOs from one observation of each site (nodes in service minus reserve)."""
        out = []
        for cid, site in self.sites.items():
            view = site.observe()
            out.append(ClusterInfo(cid=cid, hosts=max(0, view.nodes - view.reserve),
                                   speed=view.speed))
        return tuple(out)

    def busy(self, now: float) -> Sequence[Busy]:
        out: list[Busy] = []
        for cid, site in self.sites.items():
            try:
                out.extend(self._site_busy(cid, site, now))
            except ExternalError as exc:  # an unreachable site: nothing can start there
                logger.warning("%s: poll failed (%s); its hosts count as taken", cid, exc)
                out.append(Busy(cid, 1 << 30, math.inf))
        return out

    def _site_busy(self, cid: str, site: RealSite, now: float) -> list[Busy]:
        kind = getattr(site, "kind", "slurm")  # a site with no kind reads as before: Slurm
        read: BusyReader = builder(kind, "coorm_busy", "CooRM's real mode")
        return read(cid, site, now, self.epoch_offset(now), self.managed[cid])


def slurm_busy(cid: str, site: SlurmCluster, now: float, offset: float,
               managed: set[int]) -> list[Busy]:
    """CooRM's view of a Slurm site (the registry's ``coorm_busy`` of ``slurm``)."""
    return busy_from_poll(cid, site.ctl.poll(), now, offset, reserve=site.reserve,
                          partition=site.ctl.partition, managed=managed)


def oar_busy(cid: str, site: OarCluster, now: float, offset: float,
             managed: set[int]) -> list[Busy]:
    """CooRM's view of an OAR site (the registry's ``coorm_busy`` of ``oar``)."""
    return busy_from_oar_poll(cid, site.ctl.poll(), now, offset, managed=managed)


@dataclass(frozen=True, slots=True)
class Submission:
    """One job submitted for a CooRM application (``native_id``: Slurm's or OAR's id)."""

    app: str
    site: str
    job_id: str
    native_id: int
    nodes: int

    @property
    def slurm_id(self) -> int:
        """The former name of ``native_id`` (when every site was a Slurm site)."""
        return self.native_id


def native_id(site: RealSite, job_id: str) -> int | None:
    """The site's id of a job its adapter submitted (Slurm's job id, or OAR's)."""
    return site.native_id(job_id)


class RealCoorm(CooRMCore):
    """A CooRM core whose starts are real submissions (see the module docstring)."""

    def __init__(self, source: RealCapSource, config: CoreConfig | None = None,
                 platform: Platform | None = None) -> None:
        infos = source.clusters()
        super().__init__(platform or Platform(infos, hierarchical_links(infos)), config, source)
        self.real = source
        self.submissions: list[Submission] = []
        self._live: dict[str, list[Submission]] = {}

    def advance(self, now: float) -> list[Outgoing]:
        out = [self._submit(app_id, msg, now) if isinstance(msg, StartNotify) else (app_id, msg)
               for app_id, msg in super().advance(now)]
        self._cancel_ended()
        return out

    def _submit(self, app_id: str, msg: StartNotify, now: float) -> Outgoing:
        app = self.apps[app_id]
        duration = app.deadline - app.start
        made: list[Submission] = []
        for site, nodes in site_sizes(msg.rids, list(self.real.sites)).items():
            cluster = self.real.sites[site]
            spec = JobSpec(f"coorm-{app_id}-{site}", JobKind.RIGID, nodes, nodes, nodes,
                           app="fixed", runtime=duration, walltime=duration)
            granted = cluster.start(spec, nodes)
            job = native_id(cluster, spec.id)
            if granted != nodes or job is None:
                self._cancel([*made, Submission(app_id, site, spec.id, job or 0, nodes)])
                self._end(app, now, killed=True)
                return app_id, KillNotify(reason=f"the site refused the job on {site}")
            sub = Submission(app_id, site, spec.id, job, nodes)
            self.real.managed[site].add(job)
            made.append(sub)
        self.submissions.extend(made)
        self._live[app_id] = made
        logger.info("%s starts as job(s) %s", app_id,
                    ", ".join(f"{s.site}:{s.native_id}" for s in made))
        return app_id, replace(msg, jobs={sub.site: sub.native_id for sub in made})

    def _cancel_ended(self) -> None:
        for app_id in [a for a in self._live if self.apps[a].state == "ended"]:
            self._cancel(self._live.pop(app_id))

    def _cancel(self, subs: Sequence[Submission]) -> None:
        for sub in subs:
            try:
                self.real.sites[sub.site].cancel(sub.job_id)
            except ExternalError as exc:
                logger.warning("%s: cancel of job %d failed: %s", sub.site, sub.native_id, exc)

    def close(self) -> None:
        """Cancel every job still held for an application."""
        for subs in self._live.values():
            self._cancel(subs)
        self._live.clear()


def real_sites(config: ClustersConfig, run_id: str | None = None) -> dict[str, RealSite]:
    """One adapter per configured site, from the adapter registry, with a run tag of their
    own (no I/O)."""
    context = Context(ScaledClock(time.time(), 1.0), run_id or f"coorm{secrets.token_hex(3)}")
    return {s.name: build("coorm", s, context, what=f"clusters.{s.name}.kind (CooRM)")
            for s in config.sites}


def slurm_site(site: SiteConfig, ctl: SlurmCtl, context: Context) -> SlurmCluster:
    """A Slurm site of CooRM's real mode (the registry's ``coorm`` builder of ``slurm``)."""
    return SlurmCluster(site.name, ctl, context.clock, context.run_id, WalltimePayload(),
                        reserve=site.reserve, speed=site.speed)


def oar_site(site: SiteConfig, ctl: OarCtl, context: Context) -> OarCluster:
    """An OAR site of CooRM's real mode (the registry's ``coorm`` builder of ``oar``)."""
    return OarCluster(site.name, ctl, context.clock, context.run_id, OarWalltimePayload(),
                      reserve=site.reserve, speed=site.speed)


def real_core(config: ClustersConfig, core_config: CoreConfig | None = None) -> RealCoorm:
    """A CooRM core over the configured sites (observes each site once)."""
    return RealCoorm(RealCapSource(real_sites(config)), core_config)


#: The names these classes had when CooRM's real views read Slurm only.
SlurmCapSource = RealCapSource
SlurmCoorm = RealCoorm
slurm_sites = real_sites
