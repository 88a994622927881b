"""The site service: one :class:`~malleable.manager.Manager` over the configured Slurm
and OAR sites, run until stopped (``malleable manager serve``).

Each cycle (the real-time driver of ``manager run``, :mod:`malleable.realtime`, with no
workload of its own):

1. every site is polled once, in parallel (``sinfo --json; squeue --json`` on Slurm,
   ``oarnodes -J; oarstat -J`` on OAR), and its tagged user jobs are found
   (:class:`~malleable.site.adapter.SiteSlurm`, :class:`~malleable.site.oarsite.SiteOar`);
2. :meth:`SiteService.discover` adopts them: a new waiting job enters the manager's
   placement queue, a job found running is followed where it runs, a copy of a job
   already placed elsewhere is cancelled, a waiting job whose copies are all gone
   leaves the queue; a waiting job whose tag announces more copies (``copies``) than
   were found is not offered to the policy until they are all found, or until
   ``service.copies_grace`` seconds after its adoption (then it is placed where its
   copies are, and one line says which are missing);
3. the manager's cycle runs the policy (wrapped by
   :class:`~malleable.site.placement.CopiesPolicy`) and applies its placements
   (release of the held copy on Slurm, ``oarresume`` as ``oar`` on OAR) and resizes
   (the Slurm adapter's confirmed protocol; none on OAR yet);
4. the status file and the metrics are updated; a SIGHUP asks for a reload.

State is the SQLite journal of :mod:`malleable.store`; after any stop (SIGTERM, a
crash, SIGKILL) the same config takes everything up again
(:func:`malleable.site.assembly.open_service`).

The service is four modules, one per job: this one holds its state (:class:`SiteService`:
discovery, counters, status, reload), :mod:`~malleable.site.assembly` makes it from its
config (the sites from the adapter registry, :mod:`malleable.kinds`),
:mod:`~malleable.site.driver` runs it, :mod:`~malleable.site.status` writes and reads its
status file.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from malleable.adapters.outcomes import ResizeResult
from malleable.clock import ScaledClock
from malleable.config import SiteConfig
from malleable.errors import MalleableError
from malleable.health import SiteHealth
from malleable.manager import Manager
from malleable.policies.registry import PolicySpec
from malleable.realtime import RealtimeDriver
from malleable.site.channel import ChannelServer, Decoded, NotNow, native_key, unmunge
from malleable.site.config import ServiceConfig, load_service_config
from malleable.site.metrics import ServiceMetrics
from malleable.site.placement import CopiesPolicy
from malleable.site.port import Found, ServiceSite
from malleable.site.status import write_status
from malleable.store import RunInfo, Store

logger = logging.getLogger(__name__)

#: What a service's journal says it holds (a `manager run` journal is refused).
WORKLOAD = "site-service"
#: Seconds a finished job's record is kept (status shows it) before it is forgotten.
KEEP_FINISHED = 3600.0
#: At most this many finished jobs are kept (the most recently ended; the journal has all).
KEEP_FINISHED_JOBS = 100
#: At most twice this many resize results per site and manager operations are kept in
#: memory (trimmed back to this many; the journal has them all).
KEEP_HISTORY = 100

#: Makes the service's adapter of a site (a site added by a reload;
#: :func:`malleable.site.assembly.open_service` gives one).
SiteFactory = Callable[[SiteConfig], ServiceSite]


@dataclass
class SiteService:
    """Everything the running service is made of (see the module docstring)."""

    config: ServiceConfig
    store: Store
    info: RunInfo
    clock: ScaledClock
    adapters: dict[str, ServiceSite]
    manager: Manager
    copies: dict[str, frozenset[str]]
    """The sites where each waiting job's copies were found."""
    metrics: ServiceMetrics
    make_site: SiteFactory | None = None
    """Makes the adapter of a site a reload adds (None: sites are not added)."""
    channel: ChannelServer | None = None
    started: float = field(default_factory=time.time)
    cycles: int = 0
    last_cycle: float | None = None
    last_seconds: float = 0.0
    reload_requested: bool = False
    _counted: dict[str, int] = field(default_factory=dict)
    _ignored: dict[str, int] = field(default_factory=dict)
    _duplicates: set[tuple[str, int]] = field(default_factory=set)
    """Running copies reported as duplicates (site, native id): logged once."""
    offered: dict[str, frozenset[str]] = field(default_factory=dict)
    """The copies the policy may place (:class:`CopiesPolicy`'s map): :attr:`copies`, but
    no site for a job still awaiting announced copies."""
    _announced: dict[str, int] = field(default_factory=dict)
    """The number of copies each waiting job's tag announced (``copies``; only if > 1)."""
    _awaiting: set[str] = field(default_factory=set)
    """Waiting jobs logged as awaiting announced copies (logged once)."""
    _missing: set[str] = field(default_factory=set)
    """Waiting jobs whose grace ran out before all their copies were found: logged once,
    offered where their copies are."""

    def __post_init__(self) -> None:
        if self.channel is not None:
            self.channel.id_key = self.id_key

    def id_key(self, site: str) -> str:
        """The log field of a job's id on ``site``: ``slurm_id`` or ``oar_id`` by its kind."""
        adapter = self.adapters.get(site)
        return adapter.id_key if adapter is not None else native_key(site)

    # ------------------------------------------------------------ discovery

    def fresh(self, name: str) -> bool:
        """Whether the site answered this cycle's poll."""
        health = self.manager.health_of(name)
        return health is None or (health.online and not health.busy)

    def discover(self, now: float) -> None:
        """Adopt the tagged jobs the sites showed (step 2 of the module docstring)."""
        if self.channel is not None:
            self.channel.settle(self._owner, self._unmunge)
        copies: dict[str, set[str]] = {job: {s for s in sites if not self.fresh(s)}
                                       for job, sites in self.copies.items()}
        for name, adapter in self.adapters.items():
            if not self.fresh(name):
                continue
            for found in list(adapter.found.values()):
                if found.running:
                    self._running(adapter, found, now)
                else:
                    self._waiting(adapter, found, now, copies)
        self.copies.clear()
        self.copies.update({job: frozenset(s) for job, s in copies.items() if s})
        self._offer(now)
        if all(self.fresh(name) for name in self.adapters):
            for job_id in self.manager.waiting_ids():
                if job_id not in self.copies and self.manager.withdraw(
                        job_id, now, "no copy of the job is left in any queue"):
                    logger.info("event=withdrawn job=%s reason='its user cancelled it'", job_id)

    def _owner(self, site: str, slurm_id: int) -> tuple[str, bool] | None:
        adapter = self.adapters.get(site)
        if adapter is None:
            return None
        if not self.fresh(site):
            raise NotNow(site)
        return adapter.owner(slurm_id)

    def _unmunge(self, site: str, credential: str) -> Decoded:
        return unmunge(self.adapters[site].ctl.runner, credential)

    def _waiting(self, adapter: ServiceSite, found: Found, now: float,
                 copies: dict[str, set[str]]) -> None:
        record = self.manager.record(found.job_id)
        if record is None:
            self.manager.submit(found.spec(now))
            logger.info("event=adopted job=%s user=%s site=%s %s=%d state=waiting "
                        "min=%d max=%d", found.job_id, found.user, found.site, adapter.id_key,
                        found.native_id, found.tag.min_size, found.tag.max_size)
        elif record.state.finished:
            return
        placed = self.manager.cluster_of(found.job_id)
        if placed is None:
            copies.setdefault(found.job_id, set()).add(adapter.name)
            if found.tag.copies is not None:
                self._announced[found.job_id] = max(self._announced.get(found.job_id, 0),
                                                    found.tag.copies)
            return
        followed = self.adapters[placed].native_id(found.job_id) if placed in self.adapters \
            else None
        # native ids are per site: the copy placed is the same site's same id
        if followed is not None and (placed, followed) != (adapter.name, found.native_id):
            logger.info("event=copy_cancel job=%s site=%s %s=%d placed_on=%s",
                        found.job_id, adapter.name, adapter.id_key, found.native_id, placed)
            adapter.cancel_copy(found.native_id)

    def _offer(self, now: float) -> None:
        """The policy's map of copies: a job whose tag announced more copies than were
        found gets no site (it is left out of every site's view: not placed, no failed
        try) until the others are found or its grace has passed (see the module
        docstring). At most one copy per configured site can ever be found."""
        live = set(self.copies)
        self._announced = {j: n for j, n in self._announced.items() if j in live}
        self._missing &= live
        self._awaiting &= live
        self.offered.clear()
        for job_id, sites in self.copies.items():
            wanted = min(self._announced.get(job_id, 1), len(self.adapters))
            if len(sites) >= wanted or self._waited(job_id, sites, wanted, now):
                self.offered[job_id] = sites
                continue
            self.offered[job_id] = frozenset()
            if job_id not in self._awaiting:
                self._awaiting.add(job_id)
                logger.info("event=copies_awaited job=%s found=%d announced=%d sites=%s "
                            "grace=%g", job_id, len(sites), wanted, ",".join(sorted(sites)),
                            self.config.copies_grace)

    def _waited(self, job_id: str, sites: frozenset[str], wanted: int, now: float) -> bool:
        """Whether the grace for the missing copies of ``job_id`` has run out (logged once)."""
        if job_id in self._missing:
            return True
        record = self.manager.record(job_id)
        waited = now - record.spec.submit_time if record is not None else 0.0
        if waited < self.config.copies_grace:
            return False
        self._missing.add(job_id)
        logger.warning("event=copy_missing job=%s found=%d announced=%d sites=%s waited=%.1f "
                       "reason='not all its copies were found within service.copies_grace; "
                       "placed where its copies are'", job_id, len(sites), wanted,
                       ",".join(sorted(sites)), waited)
        return True

    def _running(self, adapter: ServiceSite, found: Found, now: float) -> None:
        record = self.manager.record(found.job_id)
        if record is None:
            self.manager.submit(found.spec(now))
        elif record.state.finished:
            return
        if self.manager.take_placed(found.job_id, adapter.name, found.nodes, now):
            adapter.adopt(found.spec(now), found.native_id, requested=found.nodes)
            self.store.native_submitted(adapter.name, found.job_id, found.native_id)
            logger.info("event=adopted job=%s user=%s site=%s %s=%d state=running "
                        "nodes=%d", found.job_id, found.user, adapter.name, adapter.id_key,
                        found.native_id, found.nodes)
            return
        placed = self.manager.cluster_of(found.job_id)
        mine = self.adapters[placed].native_id(found.job_id) if placed in self.adapters else None
        here = (adapter.name, found.native_id)
        if (placed, mine) != here and here not in self._duplicates:
            self._duplicates.add(here)
            logger.warning("event=duplicate job=%s site=%s %s=%d reason='another copy "
                           "of the job runs; this one is left alone'", found.job_id,
                           adapter.name, adapter.id_key, found.native_id)

    # ------------------------------------------------------------ after each cycle

    def after_cycle(self, seconds: float) -> None:
        """Count the cycle, update metrics and the status file, forget old jobs."""
        self.cycles += 1
        self.last_cycle = time.time()
        self.last_seconds = seconds
        self.metrics.cycle.observe(seconds)
        self.metrics.cycles.inc()
        self._count_resizes()
        self._count_jobs()
        self.metrics.sites((n, self.fresh(n)) for n in self.adapters)
        self._forget(self.clock.now())
        write_status(self.config.status_path, self.status())

    def _count_resizes(self) -> None:
        for name, adapter in self.adapters.items():
            done = self._counted.get(name, 0)
            for result in adapter.resizes[done:]:
                self.metrics.resizes.labels(kind=_kind(result),
                                            outcome=result.outcome.value).inc()
            self._counted[name] = len(adapter.resizes)
            if len(adapter.resizes) > 2 * KEEP_HISTORY:  # the journal has them all
                adapter.trim_resizes(KEEP_HISTORY)
                self._counted[name] = len(adapter.resizes)
            seen = self._ignored.get(name, 0)
            if len(adapter.ignored) > seen:
                self.metrics.ignored.inc(len(adapter.ignored) - seen)
            self._ignored[name] = len(adapter.ignored)
            self.metrics.placements.inc(adapter.take_placements())

    def _count_jobs(self) -> None:
        waiting = self.manager.waiting
        running = self.manager.unfinished - waiting
        self.metrics.jobs.labels(state="waiting").set(waiting)
        self.metrics.jobs.labels(state="running").set(running)

    def _forget(self, now: float) -> None:
        """Drop what only ended jobs needed: records ended more than
        :data:`KEEP_FINISHED` seconds ago or beyond the :data:`KEEP_FINISHED_JOBS` most
        recent, their adapters' state, and histories past :data:`KEEP_HISTORY`. A job any
        site still shows (a copy left in a queue) is kept: forgotten, it would be adopted
        again."""
        shown = {f.job_id for a in self.adapters.values() for f in a.found.values()}
        ended = sorted(((r.end if r.end is not None else now, job_id)
                        for job_id, r in self.manager.job_records().items() if r.state.finished),
                       reverse=True)
        old = {job_id for i, (end, job_id) in enumerate(ended)
               if (i >= KEEP_FINISHED_JOBS or now - end > KEEP_FINISHED)
               and job_id not in shown}
        if old:
            self.manager.forget(old)
            for adapter in self.adapters.values():
                adapter.forget(old)
        self.manager.trim_operations(KEEP_HISTORY, above=2 * KEEP_HISTORY)
        running = {(a.name, f.native_id) for a in self.adapters.values()
                   for f in a.found.values() if f.running}
        self._duplicates &= running

    # ------------------------------------------------------------ status

    def status(self) -> dict[str, Any]:
        """What ``manager status`` shows (also written to the status file each cycle)."""
        return {
            "pid": os.getpid(),
            "run_id": self.info.run_id,
            "config": self.config.source,
            "policy": {"name": self.config.clusters.policy.name
                       if self.config.clusters.policy else self.info.policy,
                       "options": dict(self.config.clusters.policy.options)
                       if self.config.clusters.policy else dict(self.info.options)},
            "poll": self.config.poll,
            "started": self.started,
            "cycles": self.cycles,
            "last_cycle": self.last_cycle,
            "last_cycle_seconds": round(self.last_seconds, 4),
            "sites": [self._site_status(name) for name in self.adapters],
            "jobs": list(self._jobs()),
        }

    def _site_status(self, name: str) -> dict[str, Any]:
        adapter = self.adapters[name]
        health = self.manager.health_of(name) or SiteHealth(name)
        view = adapter.last_view
        return {"name": name, "online": self.fresh(name), "last_error": health.last_error,
                "failures": health.total_failures, "nodes": view.nodes if view else None,
                "idle": view.idle if view else None, "reserve": adapter.reserve,
                "kind": adapter.kind,
                "ignored_tags": len(adapter.ignored),
                "admin_held": sorted(getattr(adapter, "admin_held", ())),
                # what the site's transport cannot do, with why (EXPAND over 22.05's REST)
                "missing": dict(getattr(adapter, "missing", {}))}

    def _jobs(self) -> Iterator[dict[str, Any]]:
        for job_id, record in self.manager.job_records().items():
            site = self.manager.cluster_of(job_id)
            adapter = self.adapters.get(site or "")
            sizes = record.sizes
            yield {"id": job_id, "user": record.spec.user, "state": record.state.value,
                   "site": site, "native_id": adapter.native_id(job_id) if adapter else None,
                   "size": sizes[-1][1] if sizes and not record.state.finished else 0,
                   "min": record.spec.min_size, "max": record.spec.max_size,
                   "copies": sorted(self.copies.get(job_id, ())),
                   "resizes": max(0, len(sizes) - 1)}

    # ------------------------------------------------------------ reload

    def reload(self, driver: RealtimeDriver | None = None) -> bool:
        """Read the config again: policy, poll period, sites and reserves (state kept).

        A config that does not load is logged and the running one kept; the state path
        and the metrics address need a restart (logged)."""
        self.reload_requested = False
        try:
            new = load_service_config(self.config.source)
            spec = new.clusters.policy or default_policy()
            policy = spec.build(new.source)
        except MalleableError as exc:
            logger.error("event=reload_failed reason=%r (the running config is kept)", str(exc))
            return False
        if new.state != self.config.state or new.metrics != self.config.metrics:
            logger.warning("event=reload_partial reason='state and metrics need a restart'")
        self.manager.set_policy(CopiesPolicy(policy, self.offered))
        self._reload_sites(new, driver)
        if driver is not None:
            driver.poll_interval = new.poll
        self.config = new
        logger.info("event=reloaded policy=%s poll=%s sites=%s", spec.name, new.poll,
                    ",".join(self.adapters))
        return True

    def _reload_sites(self, new: ServiceConfig, driver: RealtimeDriver | None) -> None:
        """Sites removed from the config leave the manager (unless it still runs managed
        jobs there: kept, logged); sites added join it (observed and placed on from the
        next cycle); the others take their new reserve."""
        wanted = {site.name: site for site in new.clusters.sites}
        for name in [n for n in self.adapters if n not in wanted]:
            if self.manager.jobs_on(name):
                logger.warning("event=site_kept site=%s reason='it still runs managed jobs'",
                               name)
                continue
            self.manager.remove_site(name)
            self.adapters.pop(name).close()
            logger.info("event=site_removed site=%s", name)
        for name, site in wanted.items():
            if name in self.adapters:
                self.adapters[name].reserve = site.reserve
                continue
            if self.make_site is None:
                logger.warning("event=site_not_added site=%s reason='this service cannot "
                               "make sites'", name)
                continue
            adapter = self.make_site(site)
            adapter.channel = self.channel
            self.manager.add_site(name, adapter,
                                  driver.new_health(name) if driver is not None else None)
            self.adapters[name] = adapter
            logger.info("event=site_added site=%s kind=%s", name, adapter.kind)

    def close(self) -> None:
        if self.channel is not None:
            self.channel.close()
        for adapter in self.adapters.values():
            adapter.close()
        self.metrics.close()
        self.store.close()


def _kind(result: ResizeResult) -> str:
    return "grow" if result.target > result.before else "shrink"


def default_policy() -> PolicySpec:
    return PolicySpec("fpsma")  # as `manager run` (malleable.service.DEFAULT_POLICY)
