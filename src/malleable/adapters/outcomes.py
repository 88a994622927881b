"""What every adapter kind reports in the same terms: the outcome of a resize
(:class:`ResizeResult`, :class:`Outcome`) and what its journal keeps of a job
(:class:`JobJournal`). Neutral names: the Slurm and OAR adapters and the site service share
them."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol


class Outcome(enum.Enum):
    """What the resource manager did with a resize request."""

    DONE = "done"
    """The job has the requested size."""
    PARTIAL = "partial"
    """The job's size changed, but not to the requested one."""
    REFUSED = "refused"
    """The job's size did not change (refused, or no nodes were free)."""


@dataclass(frozen=True, slots=True)
class ResizeResult:
    """A confirmed resize: sizes before and after (read back), the resource manager's
    reason, and timing (``job_id``: the site's own id of the job; ``helper``: the id of a
    job that brought the nodes, if any)."""

    job_id: int
    before: int
    target: int
    after: int
    outcome: Outcome
    reason: str = ""
    seconds: float = 0.0
    helper: int | None = None
    nodes_after: str = ""

    @property
    def changed(self) -> int:
        """Nodes gained (positive) or released (negative)."""
        return self.after - self.before

    def describe(self) -> str:
        text = f"job {self.job_id}: {self.before} -> {self.after} nodes (asked {self.target}): "
        text += self.outcome.value
        return f"{text} ({self.reason})" if self.reason else text


class JobJournal(Protocol):
    """What every adapter records of its jobs (SQLite in real runs,
    :class:`~malleable.store.Store`): the site's own id of a job it submitted or adopted, and
    the node failures it saw."""

    def native_submitted(self, site: str, job_id: str, native_id: int) -> None: ...

    def node_failure(self, site: str, entry: Mapping[str, object]) -> None: ...
