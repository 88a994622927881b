"""The site service's driver: the real-time driver of ``manager run`` with no workload of
its own, discovery after each poll, the service's counters and reload after each cycle."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from malleable.realtime import Outcome, RealtimeDriver
from malleable.site.daemon import SiteService


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
