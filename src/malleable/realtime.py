"""Running the manager in real time: a scaled clock and the polling driver.

The simulator calls :meth:`Manager.cycle` from its event engine; here a
:class:`RealtimeDriver` calls it every ``poll_interval`` real seconds, submits the
workload's jobs when their (scaled) submit times come, and stops when every job has
finished, when its deadline passes, or on SIGINT/SIGTERM (gracefully: the current
cycle ends, the journal is flushed, jobs on the clusters keep running and a later
run with the same state file takes them up again). A cycle that fails because a site
or a command failed is logged and tried again at the next poll; ``max_failures`` in a
row end the run with that error.

Times handed to the manager are *model seconds*: real seconds since the run began
divided by the time scale, so records compare directly with a simulation of the
same workload.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from types import FrameType
from typing import Protocol, runtime_checkable

from malleable.clock import ScaledClock
from malleable.errors import ExternalError, MalleableError
from malleable.manager import Manager
from malleable.model import JobSpec
from malleable.resources import ResourceManager

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
    max_failures: int = 10
    _next: int = 0
    _failures: int = 0
    _stopped_by: str = ""

    def __post_init__(self) -> None:
        if not self.poll_interval > 0:
            raise ValueError(f"poll interval must be positive, not {self.poll_interval!r}")
        self.jobs = sorted(self.jobs, key=lambda j: j.submit_time)

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
        with _stop_on_signals(self.stop), ThreadPoolExecutor(max_workers=8) as pool:
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
        prefetch(pool, self.manager.clusters)
        try:
            self.manager.cycle(self.clock.now())
            self._failures = 0
        except ExternalError as exc:  # a site or a command failed: try again next poll
            self._failures += 1
            logger.warning("cycle failed (%d in a row): %s", self._failures, exc)
            if self._failures >= self.max_failures:
                raise
        self.flush()
        self.on_cycle(now)
        outcome.cycles += 1
        outcome.cycle_seconds.append(self.monotonic() - started)

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


def prefetch(pool: ThreadPoolExecutor, clusters: Mapping[str, ResourceManager]) -> None:
    """Refresh every adapter that can, in parallel (one poll per site)."""
    futures = [pool.submit(rm.refresh) for rm in clusters.values() if isinstance(rm, Refreshable)]
    for future in futures:
        try:
            future.result()
        except MalleableError as exc:  # the cycle's own observe will retry and report
            logger.warning("prefetch failed: %s", exc)


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
