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
crash, SIGKILL) the same config takes everything up again (:func:`open_service`).
"""

from __future__ import annotations

import getpass
import json
import logging
import os
import secrets
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from malleable.adapters.oar.ctl import OarCtl
from malleable.adapters.oar.sites import oar_ctl_for
from malleable.adapters.pending import Negotiations
from malleable.adapters.slurm.ctl import SlurmCtl
from malleable.adapters.slurm.resize import ResizeResult
from malleable.adapters.slurm.sites import ctl_for
from malleable.clock import ScaledClock
from malleable.config import SiteConfig
from malleable.errors import InputError, MalleableError
from malleable.health import SiteHealth
from malleable.manager import Manager
from malleable.policies.registry import PolicySpec
from malleable.realtime import Outcome, RealtimeDriver
from malleable.site.adapter import Found, SiteSlurm
from malleable.site.channel import ChannelServer, Decoded, NotNow, native_key, unmunge
from malleable.site.config import ServiceConfig, load_service_config
from malleable.site.metrics import ServiceMetrics
from malleable.site.oarsite import SiteOar
from malleable.site.placement import CopiesPolicy
from malleable.store import RunInfo, Store, resume

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

CtlFactory = Callable[[SiteConfig], SlurmCtl | OarCtl]
#: The service's adapter of one site, by its kind.
ServiceSite = SiteSlurm | SiteOar


def site_ctl(site: SiteConfig) -> SlurmCtl | OarCtl:
    """A site's commands by its kind (no I/O yet)."""
    return oar_ctl_for(site) if site.kind == "oar" else ctl_for(site)


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
    ctl_factory: CtlFactory = site_ctl
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
        health = self.manager.health.get(name)
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
        record = self.manager.records.get(found.job_id)
        if record is None:
            self.manager.submit(found.spec(now))
            logger.info("event=adopted job=%s user=%s site=%s %s=%d state=waiting "
                        "min=%d max=%d", found.job_id, found.user, found.site, adapter.id_key,
                        found.slurm_id, found.tag.min_size, found.tag.max_size)
        elif record.state.finished:
            return
        placed = self.manager.cluster_of(found.job_id)
        if placed is None:
            copies.setdefault(found.job_id, set()).add(adapter.name)
            if found.tag.copies is not None:
                self._announced[found.job_id] = max(self._announced.get(found.job_id, 0),
                                                    found.tag.copies)
            return
        followed = self.adapters[placed].slurm_id(found.job_id) if placed in self.adapters \
            else None
        # native ids are per site: the copy placed is the same site's same id
        if followed is not None and (placed, followed) != (adapter.name, found.slurm_id):
            logger.info("event=copy_cancel job=%s site=%s %s=%d placed_on=%s",
                        found.job_id, adapter.name, adapter.id_key, found.slurm_id, placed)
            adapter.cancel_copy(found.slurm_id)

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
        waited = now - self.manager.records[job_id].spec.submit_time
        if waited < self.config.copies_grace:
            return False
        self._missing.add(job_id)
        logger.warning("event=copy_missing job=%s found=%d announced=%d sites=%s waited=%.1f "
                       "reason='not all its copies were found within service.copies_grace; "
                       "placed where its copies are'", job_id, len(sites), wanted,
                       ",".join(sorted(sites)), waited)
        return True

    def _running(self, adapter: ServiceSite, found: Found, now: float) -> None:
        record = self.manager.records.get(found.job_id)
        if record is None:
            self.manager.submit(found.spec(now))
        elif record.state.finished:
            return
        if self.manager.take_placed(found.job_id, adapter.name, found.nodes, now):
            adapter.adopt(found.spec(now), found.slurm_id, requested=found.nodes)
            self.store.slurm_submitted(adapter.name, found.job_id, found.slurm_id)
            logger.info("event=adopted job=%s user=%s site=%s %s=%d state=running "
                        "nodes=%d", found.job_id, found.user, adapter.name, adapter.id_key,
                        found.slurm_id, found.nodes)
            return
        placed = self.manager.cluster_of(found.job_id)
        mine = self.adapters[placed].slurm_id(found.job_id) if placed in self.adapters else None
        here = (adapter.name, found.slurm_id)
        if (placed, mine) != here and here not in self._duplicates:
            self._duplicates.add(here)
            logger.warning("event=duplicate job=%s site=%s %s=%d reason='another copy "
                           "of the job runs; this one is left alone'", found.job_id,
                           adapter.name, adapter.id_key, found.slurm_id)

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
                del adapter.resizes[:-KEEP_HISTORY]
                self._counted[name] = len(adapter.resizes)
            seen = self._ignored.get(name, 0)
            if len(adapter.ignored) > seen:
                self.metrics.ignored.inc(len(adapter.ignored) - seen)
            self._ignored[name] = len(adapter.ignored)
            self.metrics.placements.inc(adapter.placements)
            adapter.placements = 0

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
                        for job_id, r in self.manager.records.items() if r.state.finished),
                       reverse=True)
        old = {job_id for i, (end, job_id) in enumerate(ended)
               if (i >= KEEP_FINISHED_JOBS or now - end > KEEP_FINISHED)
               and job_id not in shown}
        if old:
            self.manager.forget(old)
            for adapter in self.adapters.values():
                adapter.forget(old)
        if len(self.manager.operations) > 2 * KEEP_HISTORY:
            del self.manager.operations[:-KEEP_HISTORY]
        running = {(a.name, f.slurm_id) for a in self.adapters.values()
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
        health = self.manager.health.get(name, SiteHealth(name))
        view = adapter.last_view
        return {"name": name, "online": self.fresh(name), "last_error": health.last_error,
                "failures": health.total_failures, "nodes": view.nodes if view else None,
                "idle": view.idle if view else None, "reserve": adapter.reserve,
                "kind": adapter.kind,
                "ignored_tags": len(adapter.ignored),
                # what the site's transport cannot do, with why (EXPAND over 22.05's REST)
                "missing": dict(getattr(adapter, "missing", {}))}

    def _jobs(self) -> Iterator[dict[str, Any]]:
        for job_id, record in self.manager.records.items():
            site = self.manager.cluster_of(job_id)
            adapter = self.adapters.get(site or "")
            sizes = record.sizes
            yield {"id": job_id, "user": record.spec.user, "state": record.state.value,
                   "site": site, "native_id": adapter.slurm_id(job_id) if adapter else None,
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
            spec = new.clusters.policy or _default_policy()
            policy = spec.build(new.source)
        except MalleableError as exc:
            logger.error("event=reload_failed reason=%r (the running config is kept)", str(exc))
            return False
        if new.state != self.config.state or new.metrics != self.config.metrics:
            logger.warning("event=reload_partial reason='state and metrics need a restart'")
        self.manager.policy = CopiesPolicy(policy, self.offered)
        self._reload_sites(new)
        if driver is not None:
            driver.poll_interval = new.poll
        self.config = new
        logger.info("event=reloaded policy=%s poll=%s sites=%s", spec.name, new.poll,
                    ",".join(self.adapters))
        return True

    def _reload_sites(self, new: ServiceConfig) -> None:
        wanted = {site.name: site for site in new.clusters.sites}
        for name in [n for n in self.adapters if n not in wanted]:
            busy = any(self.manager.cluster_of(j) == name and not r.state.finished
                       for j, r in self.manager.records.items())
            if busy:
                logger.warning("event=site_kept site=%s reason='it still runs managed jobs'",
                               name)
                continue
            self.adapters.pop(name).close()
            self.manager.health.pop(name, None)
        for name, site in wanted.items():
            if name in self.adapters:
                self.adapters[name].reserve = site.reserve
            else:
                self.adapters[name] = make_adapter(site, self.clock, self.info, self.store,
                                                   self.ctl_factory)
                self.adapters[name].channel = self.channel
                self.manager.health.setdefault(name, SiteHealth(name))

    def close(self) -> None:
        if self.channel is not None:
            self.channel.close()
        for adapter in self.adapters.values():
            adapter.close()
        self.metrics.close()
        self.store.close()


def _kind(result: ResizeResult) -> str:
    return "grow" if result.target > result.before else "shrink"


def _default_policy() -> PolicySpec:
    return PolicySpec("fpsma")  # as `manager run` (malleable.service.DEFAULT_POLICY)


def make_adapter(site: SiteConfig, clock: ScaledClock, info: RunInfo, store: Store,
                 ctl_factory: CtlFactory = site_ctl) -> ServiceSite:
    """The service's adapter of one site, by its kind (Slurm or OAR: InputError otherwise)."""
    if site.kind not in ("slurm", "oar"):
        raise InputError(f"clusters.{site.name}.kind: the site service drives Slurm and OAR "
                         f"sites, not {site.kind!r}")
    ctl = ctl_factory(site)
    if site.kind == "oar":
        if not isinstance(ctl, OarCtl):
            raise TypeError(f"site {site.name}: an OAR site needs OAR commands, not {ctl!r}")
        account = getpass.getuser() if site.ssh is None else site.ssh.user
        return SiteOar(site.name, ctl, clock, info.run_id, reserve=site.reserve,
                       speed=site.speed, journal=store, account=account)
    if not isinstance(ctl, SlurmCtl):
        raise TypeError(f"site {site.name}: a Slurm site needs Slurm commands, not {ctl!r}")
    return SiteSlurm(site.name, ctl, clock, info.run_id, reserve=site.reserve,
                     speed=site.speed, journal=store, negotiations=Negotiations(site.name),
                     pending_expansions=True)


def open_service(config: ServiceConfig, ctl_factory: CtlFactory = site_ctl,
                 metrics: ServiceMetrics | None = None,
                 wall: Callable[[], float] = time.time) -> SiteService:
    """The service from its config: a new journal, or the one at ``state`` resumed (its
    clock reads ``wall``, the epoch time)."""
    spec = config.clusters.policy or _default_policy()
    policy = spec.build(config.source)
    config.state.parent.mkdir(parents=True, exist_ok=True)
    store = Store.open(config.state)
    info = store.run_info()
    if info is None:
        info = RunInfo(secrets.token_hex(4), time.time(), 1.0, "", spec.name, WORKLOAD,
                       dict(spec.options))
        store.begin_run(info, [])
    elif info.workload != WORKLOAD:
        store.close()
        raise InputError(f"the state file holds a `manager run` of workload {info.workload!r}, "
                         "not a site service: use another service.state", source=config.source)
    clock = ScaledClock(info.epoch0, 1.0, wall)
    adapters = {site.name: make_adapter(site, clock, info, store, ctl_factory)
                for site in config.clusters.sites}
    copies: dict[str, frozenset[str]] = {}
    offered: dict[str, frozenset[str]] = {}
    manager = Manager(CopiesPolicy(policy, offered), adapters, max_tries=config.max_tries,
                      journal=store)
    if store.submitted():
        found = resume(store, manager, adapters)
        logger.info("event=resumed run=%s jobs=%d followed=%d waiting=%d "
                    "interrupted_resizes=%d", info.run_id, found.jobs, found.followed,
                    found.waiting, found.interrupted_resizes)
    channel = None
    if config.channel is not None:
        channel = ChannelServer(*config.channel)
        for adapter in adapters.values():
            adapter.channel = channel
    return SiteService(config, store, info, clock, adapters, manager, copies,
                       metrics or ServiceMetrics(), ctl_factory, channel, offered=offered)


@dataclass
class ServiceDriver(RealtimeDriver):
    """The real-time driver with no workload: discovery after each poll, never done."""

    service: SiteService | None = None

    @property
    def finished(self) -> bool:
        return False

    def _prefetch(self, pool: ThreadPoolExecutor) -> None:
        super()._prefetch(pool)
        if self.service is not None:
            self.service.discover(self.clock.now())

    def _cycle(self, pool: ThreadPoolExecutor, outcome: Outcome) -> None:
        super()._cycle(pool, outcome)
        seconds = outcome.cycle_seconds.pop() if outcome.cycle_seconds else 0.0
        if self.service is not None:
            self.service.after_cycle(seconds)
            if self.service.reload_requested:
                self.service.reload(self)


def driver_for(service: SiteService, site_timeout: float | None = None) -> ServiceDriver:
    """The driver of a service (a site that stays down is never given up by default: the
    service keeps trying; a poll slower than the period, up to 10 s, is waited for rather
    than the site marked unavailable)."""
    return ServiceDriver(service.manager, service.clock, (), service.config.poll,
                         site_timeout=site_timeout, service=service,
                         poll_timeout=max(10.0, 2 * service.config.poll))


def write_status(path: Path, status: dict[str, Any]) -> None:
    """Write the status file atomically (readers never see half of it)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(status, indent=1) + "\n")
    os.replace(tmp, path)


def read_status(config: ServiceConfig) -> dict[str, Any]:
    """The last status the service wrote, with ``running`` (its pid alive and recent)
    and the journal's resizes in flight; InputError when it never ran."""
    path = config.status_path
    try:
        status: dict[str, Any] = json.loads(path.read_text())
    except FileNotFoundError:
        raise InputError(f"no status file {path}: the service has not run with this "
                         "config yet", source=config.source) from None
    except (OSError, json.JSONDecodeError) as exc:
        raise InputError(f"cannot read the status file {path}: {exc}",
                         source=config.source) from None
    status["running"] = _alive(int(status.get("pid", 0)))
    last = status.get("last_cycle") or 0.0
    status["stale"] = time.time() - float(last) > 3 * float(status.get("poll", 5.0)) + 10
    status["pending_resizes"] = _open_resizes(config.state)
    return status


def _alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _open_resizes(state: Path) -> list[dict[str, Any]]:
    if not state.exists():
        return []
    store = Store.open(state)
    try:
        return [{"site": site, "job": job, "slurm_id": slurm}
                for _token, site, job, slurm in store.open_resizes()]
    finally:
        store.close()

