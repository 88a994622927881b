"""Negotiations answered later ("pending"): one per job at a time, run in worker threads.

An adapter whose answer to a grow offer or a shrink request is slow (a Slurm expansion:
``salloc`` wait, hand-over, confirmation; an MPI program's answer over its channel, up
to minutes) answers :data:`~malleable.resources.PENDING` at once and runs the
negotiation in a worker of its :class:`Negotiations`. The worker ends by appending the
answer to the adapter's events (a ``JobEvent`` with ``answer`` set: the new size, or the
size unchanged and the reason of the refusal); the manager's next cycle drains it.

While a job's negotiation is in flight the adapter shows it ``growing`` (or
``releasing``) in its view, counts the nodes a grow is about to take as not idle, and
refuses a second negotiation for it (:meth:`Negotiations.begin` says False). The
workers are daemon threads, at most ``workers`` at once per adapter: a negotiation
asked while every worker is busy is refused now (the policy may offer again later).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

logger = logging.getLogger(__name__)

WORKERS = 4
"""Negotiations one adapter runs at once."""

_KEEP_ENDED = 600.0
"""Seconds an ended negotiation is remembered (for :meth:`Negotiations.quiet_since`)."""


@dataclass(slots=True)
class InFlight:
    """A negotiation under way: ``grow`` or ``shrink`` of ``amount`` nodes."""

    kind: str
    amount: int
    began: float
    acquired: bool = False
    """A grow whose nodes the job (its helper allocation) already holds: Slurm no longer
    shows them idle, so the adapter stops subtracting them."""


class Negotiations:
    """The negotiations in flight on one adapter (see the module docstring)."""

    def __init__(self, name: str, workers: int = WORKERS,
                 clock: Callable[[], float] = time.monotonic) -> None:
        if workers < 1:
            raise ValueError(f"workers must be at least 1, not {workers}")
        self.name = name
        self.workers = workers
        self.clock = clock
        self._lock = threading.Lock()
        self._flight: dict[str, InFlight] = {}
        self._threads: dict[str, threading.Thread] = {}
        self._ended: dict[str, float] = {}

    def get(self, job_id: str) -> InFlight | None:
        """The job's negotiation in flight, if any."""
        with self._lock:
            return self._flight.get(job_id)

    def __contains__(self, job_id: object) -> bool:
        with self._lock:
            return job_id in self._flight

    def in_flight(self) -> dict[str, InFlight]:
        """A copy of the negotiations in flight, by job id."""
        with self._lock:
            return dict(self._flight)

    def begin(self, job_id: str, kind: str, amount: int, work: Callable[[], object],
              fail: Callable[[str], None]) -> bool:
        """Run ``work`` in a worker for ``job_id``; ``fail(reason)`` if it raises an
        Exception. False (nothing started) when the job has a negotiation in flight or
        every worker is busy."""
        with self._lock:
            if job_id in self._flight or len(self._flight) >= self.workers:
                return False
            self._flight[job_id] = InFlight(kind, amount, self.clock())
            thread = threading.Thread(target=self._run, args=(job_id, work, fail),
                                      name=f"negotiation-{self.name}-{job_id}", daemon=True)
            self._threads[job_id] = thread
        thread.start()
        return True

    def acquired(self, job_id: str) -> None:
        """The grow of ``job_id`` holds its new nodes now (its helper was granted)."""
        with self._lock:
            entry = self._flight.get(job_id)
            if entry is not None:
                entry.acquired = True

    def acquiring(self) -> int:
        """Nodes that grows in flight are about to take and do not hold yet."""
        with self._lock:
            return sum(f.amount for f in self._flight.values()
                       if f.kind == "grow" and not f.acquired)

    def quiet_since(self, job_id: str, since: float) -> bool:
        """Whether no negotiation of ``job_id`` was in flight or ended after ``since``
        (on this object's clock): a poll begun at ``since`` shows its size as it is."""
        with self._lock:
            return job_id not in self._flight and self._ended.get(job_id, -1e300) < since

    def _run(self, job_id: str, work: Callable[[], object], fail: Callable[[str], None]) -> None:
        try:
            work()
        except Exception as exc:  # the worker's boundary: the answer is a refusal
            logger.warning("%s: negotiation of %s failed: %s", self.name, job_id, exc)
            try:
                fail(str(exc) or type(exc).__name__)
            except Exception:  # pragma: no cover - the refusal itself could not be recorded
                logger.exception("%s: the refusal of %s could not be recorded", self.name,
                                 job_id)
        finally:
            with self._lock:
                self._flight.pop(job_id, None)
                self._threads.pop(job_id, None)
                now = self.clock()
                self._ended = {j: t for j, t in self._ended.items() if now - t < _KEEP_ENDED}
                self._ended[job_id] = now

    def wait(self, timeout: float) -> list[str]:
        """Wait up to ``timeout`` seconds for the negotiations in flight to end; the job
        ids of those still running after it."""
        deadline = time.monotonic() + timeout
        with self._lock:
            threads = list(self._threads.values())
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        with self._lock:
            return sorted(self._flight)
