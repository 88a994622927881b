"""Assembly of the site service: its sites from the adapter registry
(:mod:`malleable.kinds`, the ``serve`` builders below for Slurm and OAR), its journal, its
manager and its application channel (:func:`open_service`)."""

from __future__ import annotations

import getpass
import logging
import secrets
import time
from collections.abc import Callable

from malleable.adapters.oar.cluster import OarCluster
from malleable.adapters.oar.ctl import OarCtl
from malleable.adapters.pending import Negotiations
from malleable.adapters.slurm.cluster import SlurmCluster
from malleable.adapters.slurm.ctl import SlurmCtl
from malleable.clock import ScaledClock
from malleable.config import SiteConfig
from malleable.errors import InputError
from malleable.kinds import Context, build, kind, label, names
from malleable.manager import Manager
from malleable.site import statedir
from malleable.site.adapter import SiteSlurm
from malleable.site.channel import ChannelServer
from malleable.site.config import ServiceConfig
from malleable.site.daemon import WORKLOAD, SiteService, default_policy
from malleable.site.metrics import ServiceMetrics
from malleable.site.oarsite import SiteOar
from malleable.site.placement import CopiesPolicy
from malleable.site.port import ServiceSite
from malleable.store import RunInfo, Store, resume

logger = logging.getLogger(__name__)

#: Makes a site's commands (no I/O yet); tests give fakes.
CtlFactory = Callable[[SiteConfig], object]


def site_ctl(site: SiteConfig) -> object:
    """A site's commands, by its kind, from the adapter registry (no I/O yet)."""
    return build("commands", site)


def slurm_site(site: SiteConfig, ctl: object, context: Context) -> ServiceSite:
    """A Slurm site of the service (the registry's ``serve`` builder of ``slurm``)."""
    if not isinstance(ctl, SlurmCtl):
        raise TypeError(f"site {site.name}: a Slurm site needs Slurm commands, not {ctl!r}")
    return SiteSlurm(SlurmCluster(site.name, ctl, context.clock, context.run_id,
                                  reserve=site.reserve, speed=site.speed,
                                  journal=context.journal,
                                  negotiations=Negotiations(site.name),
                                  pending_expansions=True))


def oar_site(site: SiteConfig, ctl: object, context: Context) -> ServiceSite:
    """An OAR site of the service (the registry's ``serve`` builder of ``oar``)."""
    if not isinstance(ctl, OarCtl):
        raise TypeError(f"site {site.name}: an OAR site needs OAR commands, not {ctl!r}")
    account = getpass.getuser() if site.ssh is None else site.ssh.user
    return SiteOar(OarCluster(site.name, ctl, context.clock, context.run_id,
                              reserve=site.reserve, speed=site.speed, journal=context.journal),
                   account=account)


def _served() -> list[str]:
    return [k for k in names() if "serve" in kind(k).builders]


def make_adapter(site: SiteConfig, clock: ScaledClock, info: RunInfo, store: Store,
                 ctl_factory: CtlFactory = site_ctl) -> ServiceSite:
    """The service's adapter of one site, by its kind, from the adapter registry
    (InputError for a kind the service cannot drive)."""
    served = _served()
    if site.kind not in served:
        kinds = " and ".join(label(k) for k in served)
        raise InputError(f"clusters.{site.name}.kind: the site service drives {kinds} "
                         f"sites, not {site.kind!r}")
    adapter: ServiceSite = build("serve", site, Context(clock, info.run_id, store),
                                 ctl=ctl_factory(site))
    return adapter


def open_service(config: ServiceConfig, ctl_factory: CtlFactory = site_ctl,
                 metrics: ServiceMetrics | None = None,
                 wall: Callable[[], float] = time.time) -> SiteService:
    """The service from its config: a new journal, or the one at ``state`` resumed (its
    clock reads ``wall``, the epoch time)."""
    spec = config.clusters.policy or default_policy()
    policy = spec.build(config.source)
    statedir.prepare(config)  # modes 0700/0600 whatever the umask; refuses a shared dir
    store = Store.open(config.state)
    statedir.narrow(config.state, statedir.modes(config)[1])
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
    manager = Manager(CopiesPolicy(policy, offered), dict(adapters),
                      max_tries=config.max_tries, journal=store)
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
    def make_site(site: SiteConfig) -> ServiceSite:
        return make_adapter(site, clock, info, store, ctl_factory)

    return SiteService(config, store, info, clock, adapters, manager, copies,
                       metrics or ServiceMetrics(), make_site, channel, offered=offered)
