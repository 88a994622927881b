"""Per-site health: one failing site never stops the others.

The manager observes and acts on each site behind its own error boundary. A site whose
poll or command fails (:class:`~malleable.errors.ExternalError`), or whose poll is still
running when the cycle starts (``busy``, set by the real-time driver), is *offline*
for that cycle: the policy sees it with no idle node and none of its jobs, so nothing
is placed, grown or shrunk there, while the other sites keep their normal period.
Failures in a row back off exponentially (``base`` doubling up to ``ceiling`` seconds);
the first success brings the site back, and its adapter reconciles what happened
meanwhile from the site itself (queue and accounting).

A site offline without a break for a set time (the real-time driver's
``site_timeout``, measured on this record's clock, not in cycles) is *given up*
(:meth:`SiteHealth.give_up`): it leaves the view and is no longer acted on, and the
manager records its unfinished jobs as failed and lets its adapter drop them. It is still
*probed*: one poll every ``probe_every`` seconds, in the background, never waited for.
When a probe answers (:meth:`SiteHealth.returned`) the site is used again: its adapter
has already cancelled there the jobs the run recorded failed, so nothing of them runs
unseen.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

logger = logging.getLogger(__name__)

SITE_TIMEOUT = 300.0
"""Seconds a site may stay unavailable without a break before a run gives it up (the
default of ``manager run --site-timeout`` and of the real-time driver)."""


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
    given_up: bool = False
    """Offline for longer than the run allows: out of the view, only probed."""
    probe_every: float = 60.0
    """Seconds between two probes of a given-up site."""
    returns: int = 0
    """Times the site answered a probe after it was given up (and was used again)."""
    _retry_at: float = 0.0
    _down_since: float | None = field(default=None, repr=False)

    def usable(self) -> bool:
        """Whether to poll and act on the site in this cycle."""
        return not self.given_up and not self.busy and self.clock() >= self._retry_at

    def failing_for(self) -> float:
        """Seconds the site has been offline without a break (0 while it is online)."""
        return 0.0 if self._down_since is None else self.clock() - self._down_since

    def give_up(self) -> None:
        """Stop using the site (it has been offline for too long); probe it from now on."""
        self.given_up, self.busy = True, False  # a poll left running is a probe now
        self._retry_at = self.clock() + self.probe_every
        logger.error("site %s: unavailable for %.0f s (%s); given up: its jobs are recorded "
                     "as failed, it is probed every %.0f s; the other sites go on", self.name,
                     self.failing_for(), self.last_error or "its poll does not answer",
                     self.probe_every)

    def probe_due(self) -> bool:
        """Whether to probe the given-up site now (one poll, not waited for)."""
        return self.given_up and self.clock() >= self._retry_at

    def returned(self) -> None:
        """A probe of the given-up site answered: use it again."""
        logger.warning("site %s answers again %.0f s after it became unavailable (it was "
                       "given up): the run's jobs it still had are cancelled, it is used "
                       "again", self.name, self.failing_for())
        self.given_up, self.busy, self.returns = False, False, self.returns + 1
        self.succeeded(quiet=True)

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
        self._retry_at = self.clock() + (
            self.probe_every if self.given_up
            else min(self.ceiling, self.base * 2 ** (self.failures - 1)))
        if self.online:
            self._down(error)
        else:
            logger.info("site %s: still unavailable (%d failures in a row): %s", self.name,
                        self.failures, error)

    def _down(self, why: str) -> None:
        self.online, self.outages, self._down_since = False, self.outages + 1, self.clock()
        logger.warning("site %s is unavailable (%s); the other sites go on", self.name, why)

    def succeeded(self, quiet: bool = False) -> None:
        if not self.online and self._down_since is not None:
            down = self.clock() - self._down_since
            self.downtime += down
            if not quiet:
                logger.warning("site %s is available again after %.1f s", self.name, down)
        self.online, self.failures, self._retry_at, self._down_since = True, 0, 0.0, None

    def summary(self) -> dict[str, object]:
        """What ``summary.json`` reports of the site."""
        downtime = self.downtime
        if self._down_since is not None:
            downtime += self.clock() - self._down_since
        share = 1.0 if not self.cycles else 1 - self.offline_cycles / self.cycles
        return {"online": self.online, "availability": round(share, 4),
                "given_up": self.given_up, "returns": self.returns, "cycles": self.cycles,
                "offline_cycles": self.offline_cycles,
                "outages": self.outages, "failures": self.total_failures,
                "downtime_seconds": round(downtime, 3), "last_error": self.last_error}
