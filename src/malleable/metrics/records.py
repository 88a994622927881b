"""Per-job records: the size history of a job and the figures derived from it."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from malleable.model import JobSpec, JobState


@dataclass(slots=True)
class JobRecord:
    """What happened to one job. Times are seconds on the manager's clock.

    ``sizes`` is the step function of the job's size: ``(time, size)`` from its
    start; the size holds until the next step or the end.
    """

    spec: JobSpec
    cluster: str = ""
    placed: float | None = None
    start: float | None = None
    end: float | None = None
    state: JobState = JobState.WAITING
    reason: str = ""
    sizes: list[tuple[float, int]] = field(default_factory=list)

    def place(self, time: float, cluster: str) -> None:
        self.placed = time
        self.cluster = cluster
        if self.state is JobState.WAITING:
            self.state = JobState.PENDING

    def resize(self, time: float, size: int) -> None:
        """A start (first call) or a change of size."""
        if self.start is None:
            self.start = time
            self.state = JobState.RUNNING
        if self.sizes and self.sizes[-1][0] == time:
            self.sizes[-1] = (time, size)
        elif not self.sizes or self.sizes[-1][1] != size:
            self.sizes.append((time, size))

    def finish(self, time: float, state: JobState, reason: str = "") -> None:
        self.end = time
        self.state = state
        self.reason = reason

    # ----------------------------------------------------------- derived figures

    @property
    def wait(self) -> float:
        return self._span(self.spec.submit_time, self.start)

    @property
    def execution(self) -> float:
        return self._span(self.start, self.end)

    @property
    def response(self) -> float:
        return self._span(self.spec.submit_time, self.end)

    @property
    def max_size(self) -> int:
        return max((s for _, s in self.sizes), default=0)

    @property
    def avg_size(self) -> float:
        """Size averaged over the execution time (the size at start if it ran 0 s)."""
        if not self.sizes or self.end is None:
            return math.nan
        total = self.end - self.sizes[0][0]
        if total <= 0:
            return float(self.sizes[0][1])
        area = self.node_seconds()
        return area / total

    def node_seconds(self, until: float | None = None) -> float:
        """Integral of the size over time, from start to the end (or ``until``)."""
        end = self.end if until is None else until
        if end is None:
            return 0.0
        area = 0.0
        for i, (t, s) in enumerate(self.sizes):
            t_next = self.sizes[i + 1][0] if i + 1 < len(self.sizes) else end
            area += s * (min(t_next, end) - t) if t < end else 0.0
        return area

    @staticmethod
    def _span(a: float | None, b: float | None) -> float:
        return math.nan if a is None or b is None else b - a
