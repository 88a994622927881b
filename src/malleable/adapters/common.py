"""What the Slurm and OAR adapters share, written once: the observing half of an adapter
over one batched poll (:class:`Observed`: ``drain_events``, ``observe``, ``invalidate``,
the clamped times) and a command runner that refuses every command (:class:`NoCommands`)."""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

from malleable.adapters.observing import EventLog, SharedPoll, clamp_epoch
from malleable.adapters.shell import Result
from malleable.clock import Clock
from malleable.errors import ExternalError
from malleable.model import ClusterView
from malleable.resources import JobEvent

P = TypeVar("P")
"""An adapter's poll (Slurm's or OAR's ``Poll``)."""


class Observed(Generic[P]):
    """An adapter that sees its site through one shared poll per cycle
    (:class:`~malleable.adapters.observing.SharedPoll`) and hands out the events it derived
    from the polls (:class:`~malleable.adapters.observing.EventLog`). The Slurm and OAR
    adapters (dataclasses) hold the fields; each writes its own :meth:`_view`."""

    clock: Clock
    last_view: ClusterView | None
    _events: EventLog
    _poll: SharedPoll[P]

    def _view(self, poll: P) -> ClusterView:
        raise NotImplementedError

    def _stale(self) -> None:
        """After an action the latest poll no longer shows the site: poll again next time."""
        self._poll.stale()

    def invalidate(self) -> None:
        """Someone else acted on the site (the MPI runner resized a job): poll again."""
        self._stale()

    def drain_events(self) -> Sequence[JobEvent]:
        """New events, oldest first (:class:`~malleable.adapters.observing.EventLog`)."""
        self._poll.use("drain")
        return self._events.drain()

    def observe(self) -> ClusterView:
        self.last_view = self._view(self._poll.use("observe"))
        return self.last_view

    def _clamp(self, epoch: float | None, low: float, high: float) -> float:
        return clamp_epoch(self.clock, epoch, low, high)


@dataclass(frozen=True)
class NoCommands:
    """A :class:`~malleable.adapters.shell.CommandRunner` for commands a site does not have
    (an OAR job's runner has no Slurm commands): any call is a bug, and says so."""

    what: str = "a command this site does not have"

    def run(self, argv: Sequence[str], timeout: float, *, input: str | None = None,
            check: bool = True) -> Result:
        raise ExternalError(f"{self.what}: {shlex.join(argv)}")

    def close(self) -> None:
        return None
