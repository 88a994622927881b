"""Per-site health: one failing site never stops the others.

The manager observes and acts on each site behind its own error boundary. A site whose
poll or command fails (:class:`~malleable.errors.ExternalError`), or whose poll is still
running when the cycle starts (``busy``, set by the real-time driver), is *offline*
for that cycle: the policy sees it with no idle node and none of its jobs, so nothing
is placed, grown or shrunk there, while the other sites keep their normal period.
Failures in a row back off exponentially (``base`` doubling up to ``ceiling`` seconds);
the first success brings the site back, and its adapter reconciles what happened
meanwhile from the site itself (queue and accounting).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

logger = logging.getLogger(__name__)


@dataclass
class SiteHealth:
    """Availability, failures and back-off of one site, as the manager saw them."""

    name: str
    base: float = 1.0
    """Seconds before the first retry after a failure (doubled at each failure in a row)."""
    ceiling: float = 4.0
    """The longest back-off, in seconds: keep it near the poll period, so a site that
    comes back is used again within a poll or two."""
    clock: Callable[[], float] = time.monotonic
    online: bool = True
    busy: bool = False
    """Its poll is still running in the background: skipped this cycle, not a failure."""
    failures: int = 0
    """Failures in a row (0 while the site answers)."""
    total_failures: int = 0
    outages: int = 0
    last_error: str = ""
    cycles: int = 0
    offline_cycles: int = 0
    downtime: float = 0.0
    _retry_at: float = 0.0
    _down_since: float | None = field(default=None, repr=False)

    def usable(self) -> bool:
        """Whether to poll and act on the site in this cycle."""
        return not self.busy and self.clock() >= self._retry_at

    def counted(self, online: bool) -> None:
        """Count one cycle in which the site was (or was not) in the view."""
        self.cycles += 1
        if online:
            return
        self.offline_cycles += 1
        if self.online:  # offline without a failure: its poll is still running
            self._down("its poll has not answered yet")

    def failed(self, error: str) -> None:
        self.failures += 1
        self.total_failures += 1
        self.last_error = error
        self._retry_at = self.clock() + min(self.ceiling, self.base * 2 ** (self.failures - 1))
        if self.online:
            self._down(error)
        else:
            logger.info("site %s: still unavailable (%d failures in a row): %s", self.name,
                        self.failures, error)

    def _down(self, why: str) -> None:
        self.online, self.outages, self._down_since = False, self.outages + 1, self.clock()
        logger.warning("site %s is unavailable (%s); the other sites go on", self.name, why)

    def succeeded(self) -> None:
        if not self.online and self._down_since is not None:
            down = self.clock() - self._down_since
            self.downtime += down
            logger.warning("site %s is available again after %.1f s", self.name, down)
        self.online, self.failures, self._retry_at, self._down_since = True, 0, 0.0, None

    def summary(self) -> dict[str, object]:
        """What ``summary.json`` reports of the site."""
        downtime = self.downtime
        if self._down_since is not None:
            downtime += self.clock() - self._down_since
        share = 1.0 if not self.cycles else 1 - self.offline_cycles / self.cycles
        return {"online": self.online, "availability": round(share, 4),
                "cycles": self.cycles, "offline_cycles": self.offline_cycles,
                "outages": self.outages, "failures": self.total_failures,
                "downtime_seconds": round(downtime, 3), "last_error": self.last_error}
