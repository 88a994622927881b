"""Where resize decisions come from: a pluggable :class:`ResizeSource`.

Only rank 0 of the running process set talks to the source, at the reconfiguration
points the inhibitors let through. A source offers a new total size (an
:class:`Offer`); the application answers with the size it accepts; the new process
set (or the old one, if nothing changed) reports completion.

* :class:`Scripted`: a fixed schedule of sizes by iteration, for demos and tests.
* :class:`FileChannel`: offers written by the runner as JSON files in a directory,
  answers and completions written back beside them (:mod:`malleable.mpi.channel`
  documents the files).
* :class:`DmrSource`: DMRlib's Algorithm 2 evaluated at the reconfiguration point
  from a probe of the resources (free nodes, pending jobs).

No MPI here: sources are unit-tested on their own.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from malleable.mpi.params import Params
from malleable.policies.dmr import JobLimits, ResizeKind, dmr_resize

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Point:
    """A reconfiguration point as rank 0 sees it."""

    iteration: int
    size: int
    params: Params
    elapsed: float = 0.0
    """Seconds since the application started (for logs)."""


@dataclass(frozen=True, slots=True)
class Offer:
    """A resize offer: a new total process count and where the new processes may run.

    ``hosts`` are the hosts of the new allocation in rank order, each ``"host"`` (one
    process) or ``"host:k"`` (k processes); the first must be where rank 0 and
    mpirun run (the batch host). Empty: spawn where mpirun sees fit.
    """

    target: int
    hosts: tuple[str, ...] = ()
    mandatory: bool = False
    seq: int = 0
    """The runner's number for this offer (0 for local sources)."""


@dataclass(frozen=True, slots=True)
class Report:
    """How a resize ended, as the new process set (or the old one) reports it."""

    seq: int
    size: int
    iteration: int
    seconds: float = 0.0
    error: str = ""


class ResizeSource(Protocol):
    """Anything that can offer resizes to an application."""

    def poll(self, point: Point) -> Offer | None:
        """An offer to consider now, or None."""
        ...

    def answered(self, offer: Offer, point: Point, accepted: int) -> None:
        """The application's answer: ``accepted`` is the new total (``point.size``: declined)."""
        ...

    def completed(self, report: Report) -> None:
        """The resize is over (called by rank 0 of the process set that carries on)."""
        ...

    def request(self, target: int, iteration: int) -> int:
        """The application asks for ``target`` processes itself; a request number (0: nobody
        to ask)."""
        ...

    def record(self, event: Mapping[str, Any]) -> None:
        """Note a start, resize or finish event (for the runner's report)."""
        ...

    def snapshot(self) -> dict[str, Any]:
        """State to hand over to the new process set (JSON-able)."""
        ...

    def restore(self, state: Mapping[str, Any]) -> None:
        """Take over the state of the previous process set."""
        ...


class _Quiet:
    """Default answers for local sources: log and carry on."""

    def request(self, target: int, iteration: int) -> int:
        logger.info("iteration %d: the application asks for %d processes; this source "
                    "takes no requests", iteration, target)
        return 0

    def record(self, event: Mapping[str, Any]) -> None:
        logger.debug("event %s", dict(event))

    def answered(self, offer: Offer, point: Point, accepted: int) -> None:
        logger.info("offer %d at iteration %d: accepted %d of %d", offer.seq, point.iteration,
                    accepted, offer.target)

    def completed(self, report: Report) -> None:
        logger.info("resize %d done: %d processes at iteration %d in %.3f s%s", report.seq,
                    report.size, report.iteration, report.seconds,
                    f" ({report.error})" if report.error else "")


@dataclass
class Scripted(_Quiet):
    """A fixed schedule: at iteration ``i`` (or the first check after it) offer ``size``.

    Each step is offered once. ``Scripted({0: 2, 10: 4, 20: 2})`` grows to 4 at
    iteration 10 and shrinks back to 2 at 20.
    """

    steps: Mapping[int, int]
    hosts: tuple[str, ...] = ()
    done_upto: int = -1

    def __post_init__(self) -> None:
        for iteration, size in self.steps.items():
            if iteration < 0 or size < 1:
                raise ValueError(f"schedule step {iteration}:{size} needs iteration >= 0 "
                                 "and size >= 1")

    @classmethod
    def phases(cls, sizes: Sequence[int], iterations: int) -> Scripted:
        """Equal phases over ``iterations``: ``phases([2, 4, 2], 30)`` -> {0: 2, 10: 4, 20: 2}."""
        if not sizes:
            raise ValueError("a schedule needs at least one size")
        if iterations < len(sizes):
            raise ValueError(f"{iterations} iterations cannot hold {len(sizes)} phases")
        return cls({iterations * k // len(sizes): size for k, size in enumerate(sizes)})

    @classmethod
    def parse(cls, text: str, iterations: int) -> Scripted:
        """``"2,4,2"`` (equal phases) or ``"0:2,10:4,20:2"`` (iteration:size)."""
        items = [item.strip() for item in text.split(",") if item.strip()]
        try:
            if any(":" in item for item in items):
                pairs = (item.split(":", 1) for item in items)
                return cls({int(i): int(s) for i, s in pairs})
            return cls.phases([int(item) for item in items], iterations)
        except ValueError as exc:
            raise ValueError(f"bad schedule {text!r} ({exc}): write sizes like 2,4,2 or "
                             "iteration:size pairs like 0:2,10:4") from None

    def poll(self, point: Point) -> Offer | None:
        due = [i for i in self.steps if self.done_upto < i <= point.iteration]
        if not due:
            return None
        step = max(due)
        self.done_upto = step
        target = self.steps[step]
        return Offer(target, self.hosts, seq=step) if target != point.size else None

    def snapshot(self) -> dict[str, Any]:
        return {"done_upto": self.done_upto}

    def restore(self, state: Mapping[str, Any]) -> None:
        self.done_upto = int(state.get("done_upto", -1))


@dataclass(frozen=True, slots=True)
class Resources:
    """What a probe sees: free nodes and the sizes of the pending jobs, in queue order."""

    available: int
    pending: tuple[int, ...] = ()
    hosts: tuple[str, ...] = ()


@dataclass
class DmrSource(_Quiet):
    """DMRlib's Algorithm 2 at each check, from ``probe()`` (free nodes, pending jobs)."""

    probe: Callable[[], Resources]
    checks: int = field(default=0)

    def poll(self, point: Point) -> Offer | None:
        self.checks += 1
        seen = self.probe()
        params = point.params
        limits = JobLimits(params.minimum, params.maximum, params.target_preferred,
                           params.size_rule)
        decision = dmr_resize(point.size, limits, seen.available, seen.pending)
        if decision.kind is ResizeKind.NONE:
            return None
        return Offer(decision.target, seen.hosts, seq=self.checks)

    def snapshot(self) -> dict[str, Any]:
        return {"checks": self.checks}

    def restore(self, state: Mapping[str, Any]) -> None:
        self.checks = int(state.get("checks", 0))
