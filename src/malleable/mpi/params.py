"""Malleability parameters and inhibitors of an application (DMRlib section 3.2).

Pure code: no MPI, no wall clock (times are passed in), so the rules are unit-tested
without ``mpirun``.

* :class:`Params` bounds the process count (minimum, maximum, preferred) and says
  which sizes the application accepts (any, or only powers of two like an FFT).
* :class:`Inhibitors` keeps reconfiguration checks rare when iterations are short:
  at most one check per ``period`` seconds and one every ``every`` iterations
  (DMRlib's ``DMR_Set_sched_period`` and ``DMR_Set_sched_iteration``).
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass

from malleable.model import SizeRule


class Outcome(enum.Enum):
    """What a reconfiguration point did."""

    CONTINUE = "continue"
    """No resize: carry on with the same processes."""
    EXPAND = "expand"
    """A larger process set took over."""
    SHRINK = "shrink"
    """A smaller process set took over."""


@dataclass(frozen=True, slots=True)
class Params:
    """The process counts an application runs with: ``minimum <= preferred <= maximum``.

    ``size_rule`` says which totals it accepts: ``SizeRule.POW2`` takes the largest
    power of two that fits an offer and gives the rest back.
    """

    minimum: int
    maximum: int
    preferred: int | None = None
    size_rule: SizeRule = SizeRule.ANY

    def __post_init__(self) -> None:
        if self.minimum < 1:
            raise ValueError(f"minimum process count {self.minimum} is below 1")
        if self.maximum < self.minimum:
            raise ValueError(f"maximum {self.maximum} is below minimum {self.minimum}")
        if self.preferred is not None and not self.minimum <= self.preferred <= self.maximum:
            raise ValueError(f"preferred {self.preferred} is outside "
                             f"[{self.minimum}, {self.maximum}]")

    @property
    def target_preferred(self) -> int:
        """The preferred size, or the minimum when none was given."""
        return self.minimum if self.preferred is None else self.preferred

    def accept(self, current: int, target: int) -> int:
        """The new size this application takes when offered ``target`` processes in total.

        A grow offer (``target > current``) takes the largest accepted size up to
        ``min(target, maximum)``; a shrink request takes the largest accepted size down
        to ``max(target, minimum)``. When no accepted size exists, the answer is
        ``current`` (the offer is turned down).
        """
        if target > current:
            new = self.size_rule.largest_fit(min(target, self.maximum))
            return new if new > current else current
        if target < current:
            new = self.size_rule.largest_fit(max(target, self.minimum))
            return new if self.minimum <= new < current else current
        return current


@dataclass(frozen=True, slots=True)
class Inhibitors:
    """How rarely reconfiguration points really check: ``period`` s and ``every`` iterations.

    ``period=0`` and ``every=1`` check at every point.
    """

    period: float = 0.0
    every: int = 1

    def __post_init__(self) -> None:
        if not (self.period >= 0 and math.isfinite(self.period)):
            raise ValueError(f"inhibitor period {self.period} must be a non-negative number")
        if self.every < 1:
            raise ValueError(f"inhibitor 'every' {self.every} must be at least 1 iteration")

    def due_by_iteration(self, iteration: int, last_iteration: int | None) -> bool:
        """True when ``every`` iterations passed since the last check (or none was made)."""
        return last_iteration is None or iteration - last_iteration >= self.every

    def due_by_time(self, now: float, last_time: float | None) -> bool:
        """True when ``period`` seconds passed since the last check (or none was made)."""
        return last_time is None or now - last_time >= self.period


@dataclass(slots=True)
class CheckClock:
    """When the last real check was made; one per process set (rank 0 owns the time)."""

    inhibitors: Inhibitors
    last_iteration: int | None = None
    last_time: float | None = None

    def iteration_due(self, iteration: int) -> bool:
        return self.inhibitors.due_by_iteration(iteration, self.last_iteration)

    def time_due(self, now: float) -> bool:
        return self.inhibitors.due_by_time(now, self.last_time)

    def checked(self, iteration: int, now: float) -> None:
        self.last_iteration = iteration
        self.last_time = now
