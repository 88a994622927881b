"""The site service for unit tests on fake sites: its configuration (OAR sites by name, each
reached at ``NAME-ctl``, Slurm sites with the defaults, FPSMA with the approach asked), the
service opened over the fakes with no waits, and its cycles run to their end."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from malleable.config import SiteConfig
from malleable.realtime import Outcome
from malleable.site.assembly import open_service
from malleable.site.config import ServiceConfig, parse_service_config
from malleable.site.daemon import SiteService
from malleable.site.driver import ServiceDriver, driver_for
from tests.fakes.slurm import settle

ACCOUNT = "malleable"
"""The service account the fake sites see."""


def service_config(tmp_path: Path, oar: Sequence[str] = ("grid",), slurm: Sequence[str] = (),
                   approach: str = "pra", channel: str = "") -> ServiceConfig:
    clusters: dict[str, dict[str, str]] = {n: {"kind": "oar", "host": f"{n}-ctl"} for n in oar}
    clusters.update({n: {} for n in slurm})
    service: dict[str, Any] = {"state": str(tmp_path / "state.sqlite"), "poll": 1.0}
    if channel:
        service["channel"] = channel
    doc = {"service": service,
           "policy": {"name": "fpsma", "options": {"approach": approach}},
           "ssh": {"user": ACCOUNT, "key": "id", "known_hosts": "known"},
           "clusters": clusters}
    return parse_service_config(doc, str(tmp_path / "manager.toml"), tmp_path)


def open_quick(config: ServiceConfig, ctl: Callable[[SiteConfig], Any],
               wall: Callable[[], float] = time.time) -> tuple[SiteService, ServiceDriver]:
    """The service over fake sites (``ctl`` gives each site its commands) and its driver,
    with the resizers' waits off (a fake Slurm answers at once)."""
    service = open_service(config, ctl, wall=wall)
    for adapter in service.adapters.values():
        resizer = getattr(adapter, "resizer", None)
        if resizer is not None:
            resizer.sleep = lambda s: None
            resizer.settle = 0.0
    return service, driver_for(service)


def run_cycles(driver: ServiceDriver, cycles: int = 1) -> None:
    """Run cycles; after each, wait for the expansions it began in workers (answered
    pending: the manager hears them in the next cycle), so that every test sees the same
    order whatever the machine's load."""
    with ThreadPoolExecutor(max_workers=2) as pool:
        for _ in range(cycles):
            driver._cycle(pool, Outcome(0, "", 0))
            assert settle(driver.manager.clusters.values()) == [], "a negotiation did not end"
