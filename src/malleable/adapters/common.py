"""What the Slurm and OAR adapters share, written once: their event log and shared poll
(:class:`Observed`: ``close``, ``drain_events``, ``observe``, ``invalidate``) and a command
runner that refuses every command (:class:`NoCommands`)."""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from dataclasses import dataclass

from malleable.adapters.shell import Result
from malleable.errors import ExternalError


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
