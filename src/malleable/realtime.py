"""Running the manager in real time: a scaled clock and the polling driver.

The simulator calls :meth:`Manager.cycle` from its event engine; here a
:class:`RealtimeDriver` calls it every ``poll_interval`` real seconds, submits the
workload's jobs when their (scaled) submit times come, and stops when every job has
finished, when its deadline passes, or on SIGINT/SIGTERM (gracefully: the current
cycle ends, the journal is flushed, jobs on the clusters keep running and a later
run with the same state file takes them up again).

Each site is polled in a thread of its own ahead of the cycle. A poll that fails marks
its site offline (:mod:`malleable.health`); a poll still running after
``poll_timeout`` seconds is left running and its site skipped in this cycle (and in the
next ones, without waiting again, until it answers), so a hung controller holds up the
other sites once, for ``poll_timeout``, not in every cycle of its outage. A site offline
without a break for ``site_timeout`` seconds (a duration, whatever the cycles' length)
is given up: out of the view, its unfinished jobs recorded failed and dropped by its
adapter (:meth:`Manager.give_up_site`), the other sites go on. It is still probed every
``site_probe`` seconds (one poll in the background, never waited for); once a probe
answers, the jobs of this run it still had have been cancelled by that poll and the site
is used again from the next cycle. The run ends on failing sites only when every site
was given up (:class:`~malleable.errors.ExternalError`, exit 3, state kept).

Times handed to the manager are *model seconds*: real seconds since the run began
divided by the time scale, so records compare directly with a simulation of the
same workload.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import FrameType
from typing import Protocol, runtime_checkable

from malleable.clock import ScaledClock
from malleable.errors import ExternalError
from malleable.health import SITE_TIMEOUT, SiteHealth
from malleable.manager import Manager
from malleable.model import JobSpec

logger = logging.getLogger(__name__)


@runtime_checkable
class Refreshable(Protocol):
    """An adapter that can take its next observation ahead of the cycle (in a thread)."""

    def refresh(self) -> None: ...


@dataclass
class Outcome:
    """How a real-time run ended."""

    cycles: int
    stopped: str  # "done", "signal", "deadline"
    submitted: int
    cycle_seconds: list[float] = field(default_factory=list)


@dataclass
class RealtimeDriver:
    """Calls ``manager.cycle`` in real time and feeds it the workload (see module doc)."""

    manager: Manager
    clock: ScaledClock
    jobs: Sequence[JobSpec] = ()
    poll_interval: float = 1.0
    flush: Callable[[], None] = lambda: None
    on_cycle: Callable[[float], None] = lambda now: None
    monotonic: Callable[[], float] = time.monotonic
    stop_event: threading.Event = field(default_factory=threading.Event)
    pause: Callable[[float], object] | None = None
    site_timeout: float | None = SITE_TIMEOUT
    """Seconds a site may stay unavailable without a break before it is given up
    (None: never; a service keeps trying)."""
    site_probe: float | None = None
    """Seconds between two probes of a given-up site (default: the site timeout, at most
    60)."""
    poll_timeout: float | None = None
    """Seconds the cycle waits for a site's poll (default: the poll interval, at least 1)."""
    _next: int = 0
    _stopped_by: str = ""
    _polls: dict[str, Future[None]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if not self.poll_interval > 0:
            raise ValueError(f"poll interval must be positive, not {self.poll_interval!r}")
        if self.site_timeout is not None and not self.site_timeout > 0:
            raise ValueError(f"site timeout must be positive, not {self.site_timeout!r}")
        self.jobs = sorted(self.jobs, key=lambda j: j.submit_time)
        if self.poll_timeout is None:
            self.poll_timeout = max(1.0, self.poll_interval)
        if self.site_probe is None:
            self.site_probe = min(60.0, self.site_timeout or 60.0)
        for name in self.manager.clusters:
            self.manager.health.setdefault(name, self.new_health(name))

    def new_health(self, name: str) -> SiteHealth:
        """A site's health record with this driver's back-off (a site added while it runs
        gets one: :meth:`Manager.add_site`)."""
        probe = self.site_probe if self.site_probe is not None else 60.0  # set at init
        return SiteHealth(name, base=min(1.0, self.poll_interval), ceiling=2 * self.poll_interval,
                          clock=self.monotonic, probe_every=probe)

    def stop(self, reason: str = "signal") -> None:
        """Ask the loop to end after the current cycle (thread- and signal-safe)."""
        self._stopped_by = self._stopped_by or reason
        self.stop_event.set()

    @property
    def finished(self) -> bool:
        return self._next >= len(self.jobs) and self.manager.unfinished == 0

    def run(self, deadline: float | None = None) -> Outcome:
        """Cycle until done, stopped, or ``deadline`` real seconds have passed."""
        began = self.monotonic()
        end = None if deadline is None else began + deadline
        outcome = Outcome(0, "done", 0)
        workers = max(4, len(self.manager.clusters))
        with _stop_on_signals(self.stop), ThreadPoolExecutor(max_workers=workers) as pool:
            while not self.stop_event.is_set():
                tick = self.monotonic()
                self._cycle(pool, outcome)
                if self.finished or self.stop_event.is_set():
                    break
                if end is not None and self.monotonic() >= end:
                    self.stop("deadline")
                    break
                (self.pause or self.stop_event.wait)(self._pause(tick, end))
        self.flush()
        outcome.stopped = self._stopped_by or "done"
        outcome.submitted = self._next
        return outcome

    def _cycle(self, pool: ThreadPoolExecutor, outcome: Outcome) -> None:
        started = self.monotonic()
        now = self.clock.now()
        self._submit_due(now)
        self._prefetch(pool)
        self.manager.cycle(self.clock.now())
        self._give_up_failing()
        self.flush()
        self.on_cycle(now)
        outcome.cycles += 1
        outcome.cycle_seconds.append(self.monotonic() - started)

    def _prefetch(self, pool: ThreadPoolExecutor) -> None:
        """Poll every usable site in parallel; wait at most ``poll_timeout`` seconds for
        the polls begun in this cycle. A poll still running from an earlier cycle (a hung
        controller) is not waited for again: it is used if it has answered by now, else
        its site is skipped once more, so a hung site costs the other sites' cycle the
        wait once, not in every cycle of its outage."""
        health = self.manager.health
        begun: list[Future[None]] = []
        for name, rm in self.manager.clusters.items():
            if (name not in self._polls and isinstance(rm, Refreshable)
                    and (health[name].usable() or health[name].probe_due())):
                self._polls[name] = pool.submit(rm.refresh)
                if not health[name].given_up:
                    begun.append(self._polls[name])
        wait(begun, timeout=self.poll_timeout)
        for name, future in list(self._polls.items()):
            if name not in health:  # a site removed while its poll ran: not waited for
                del self._polls[name]
                continue
            if health[name].given_up:
                self._probed(name, future)
                continue
            health[name].busy = not future.done()
            if health[name].busy:
                logger.info("site %s: its poll is still running; skipped in this cycle", name)
                continue
            del self._polls[name]
            exc = future.exception()
            if isinstance(exc, ExternalError):
                health[name].failed(str(exc))
            elif exc is not None:  # not the site's fault: the cycle's own observe reports it
                logger.warning("site %s: poll failed: %s", name, exc)

    def _probed(self, name: str, future: Future[None]) -> None:
        """A given-up site's probe: left running, or answered (used again), or failed."""
        if not future.done():
            return
        del self._polls[name]
        exc = future.exception()
        if exc is None:
            self.manager.health[name].returned()
        else:
            self.manager.health[name].failed(str(exc))

    def _give_up_failing(self) -> None:
        """Give up each site offline for ``site_timeout`` seconds without a break; end the
        run (ExternalError) once every site is given up."""
        if self.site_timeout is None:
            return
        health = self.manager.health
        for name, h in health.items():
            if not h.given_up and h.failing_for() >= self.site_timeout:
                lost = self.manager.give_up_site(name, self.clock.now())
                if lost:
                    logger.error("site %s given up: %d job(s) recorded failed: %s", name,
                                 len(lost), ", ".join(lost))
        if health and all(h.given_up for h in health.values()):
            errors = "; ".join(f"{h.name}: {h.last_error or 'poll still running'}"
                               for h in health.values())
            raise ExternalError(f"every site has been unavailable for at least "
                                f"{self.site_timeout:g} s without a break ({errors})")

    def _submit_due(self, now: float) -> None:
        while self._next < len(self.jobs) and self.jobs[self._next].submit_time <= now:
            self.manager.submit(self.jobs[self._next])
            self._next += 1

    def _pause(self, tick: float, end: float | None) -> float:
        """Until the next poll, or the next arrival if it comes sooner."""
        wake = tick + self.poll_interval
        if self._next < len(self.jobs):
            arrival = self.clock.to_epoch(self.jobs[self._next].submit_time)
            wake = min(wake, self.monotonic() + max(0.0, arrival - self.clock.wall()))
        if end is not None:
            wake = min(wake, end)
        return max(0.0, wake - self.monotonic())


@contextmanager
def _stop_on_signals(stop: Callable[[str], None]) -> Iterator[None]:
    """SIGINT and SIGTERM ask for a graceful stop (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, frame: FrameType | None) -> None:
        logger.warning("%s: stopping after this cycle", signal.Signals(signum).name)
        stop("signal")

    previous = {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
