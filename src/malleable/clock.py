"""The manager's clock: model seconds, and how a resource manager's epoch times map onto them.

The simulator's engine is its own clock (model seconds are simulated seconds); a
real run uses a :class:`ScaledClock` over the wall clock, so records of a real run
compare directly with a simulation of the same workload. Adapters and drivers take
a :class:`Clock` and never read the wall clock themselves.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol


class Clock(Protocol):
    """The manager's clock, and how Slurm's epoch times map onto it."""

    def now(self) -> float: ...

    def from_epoch(self, epoch: float) -> float: ...


@dataclass(frozen=True, slots=True)
class ScaledClock:
    """Model seconds since ``epoch0`` (wall clock), at ``scale`` real seconds per model second."""

    epoch0: float
    scale: float = 1.0
    wall: Callable[[], float] = time.time

    def __post_init__(self) -> None:
        if not self.scale > 0:
            raise ValueError(f"time scale must be positive, not {self.scale!r}")

    def now(self) -> float:
        return self.from_epoch(self.wall())

    def from_epoch(self, epoch: float) -> float:
        return (epoch - self.epoch0) / self.scale

    def to_epoch(self, model: float) -> float:
        return self.epoch0 + model * self.scale
