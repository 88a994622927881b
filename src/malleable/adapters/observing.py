"""What every polling adapter (Slurm, OAR) does the same way: one poll shared by a
cycle's drain and observe, job events handed out oldest first, and a resource
manager's timestamps clamped into the run's clock.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import replace
from typing import Generic, TypeVar

from malleable.clock import Clock
from malleable.resources import JobEvent

P = TypeVar("P")


class SharedPoll(Generic[P]):
    """The latest poll of a site, used once by ``drain`` and once by ``observe``.

    A cycle drains events and then observes: both use one poll (taken ahead by the
    driver's prefetch, or by whichever comes first). After an action of ours the poll
    no longer shows the site (:meth:`stale`): the next use polls again.
    """

    def __init__(self, refresh: Callable[[], None]) -> None:
        self._refresh = refresh
        self.latest: P | None = None
        self._unused: set[str] = set()

    def taken(self, poll: P) -> None:
        """A new poll, for the next drain and the next observe."""
        self.latest = poll
        self._unused = {"drain", "observe"}

    def stale(self) -> None:
        self._unused = set()

    def use(self, purpose: str) -> P:
        """The latest poll if ``purpose`` has not used it yet; a new poll otherwise."""
        if purpose not in self._unused or self.latest is None:
            self._refresh()
        self._unused.discard(purpose)
        assert self.latest is not None  # the refresh took one
        return self.latest


class EventLog:
    """A site's job events, handed out oldest first, never older than one already out.

    A resource manager dates starts and ends in whole seconds while a resize is dated
    when it is confirmed, so one batch may hold them out of order: it is sorted
    (stably, so each job's own events keep their order), and an event dated before the
    last one handed out is dated at that event instead. Events may be appended from
    other threads (the answers of pending negotiations).
    """

    def __init__(self) -> None:
        self._pending: list[JobEvent] = []
        self._handed_out = float("-inf")
        self._lock = threading.Lock()

    def append(self, event: JobEvent) -> None:
        with self._lock:
            self._pending.append(event)

    def drain(self) -> list[JobEvent]:
        with self._lock:
            events, self._pending = self._pending, []
        events.sort(key=lambda e: e.time)
        for i, event in enumerate(events):
            if event.time < self._handed_out:
                events[i] = replace(event, time=self._handed_out)
            self._handed_out = events[i].time
        return events


def clamp_epoch(clock: Clock, epoch: float | None, low: float, high: float) -> float:
    """A resource manager's epoch time (whole seconds: its middle) in the run's clock,
    within [low, high]; ``high`` when it gave none."""
    if epoch is None:
        return high
    return min(high, max(low, clock.from_epoch(epoch + 0.5)))
