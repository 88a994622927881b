"""Per-job records: the size history of a job and the figures derived from it."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from malleable.model import JobSpec, JobState


@dataclass(slots=True)
class JobRecord:
    """What happened to one job. Times are seconds on the manager's clock.

    :attr:`sizes` is the step function of the job's size: ``(time, size)`` from its
    start; the size holds until the next step or the end. It is kept compact (a million
    records are held at once): the first size alone (its time is the start), the later
    steps in a list only when the job was resized.
    """

    spec: JobSpec
    cluster: str = ""
    placed: float | None = None
    start: float | None = None
    end: float | None = None
    state: JobState = JobState.WAITING
    reason: str = ""
    _first: int | None = field(default=None, kw_only=True, repr=False)
    _later: list[tuple[float, int]] | None = field(default=None, kw_only=True, repr=False)

    def __init__(self, spec: JobSpec, cluster: str = "", placed: float | None = None,
                 start: float | None = None, end: float | None = None,
                 state: JobState = JobState.WAITING, reason: str = "", *,
                 _first: int | None = None,
                 _later: list[tuple[float, int]] | None = None) -> None:
        # Written out as dataclasses would write it (tests/unit/test_model_init.py checks
        # that): compiled, the stores are direct; the generated one would run interpreted.
        self.spec = spec
        self.cluster = cluster
        self.placed = placed
        self.start = start
        self.end = end
        self.state = state
        self.reason = reason
        self._first = _first
        self._later = _later

    @property
    def sizes(self) -> list[tuple[float, int]]:
        """The size steps ``[(time, size), ...]`` (a new list: the record is not changed)."""
        if self._first is None or self.start is None:
            return []
        first = [(self.start, self._first)]
        return first + self._later if self._later else first

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
        later = self._later
        if later:
            if later[-1][0] == time:
                later[-1] = (time, size)
            elif later[-1][1] != size:
                later.append((time, size))
        elif self._first is None or time == self.start:
            self._first = size
        elif self._first != size:
            self._later = [(time, size)]

    def requeue(self) -> None:
        """Back to the placement queue (a submission that never happened, or a retry after
        a failure that was not the job's fault): the record covers the next attempt."""
        self.cluster, self.placed, self.start, self.end = "", None, None, None
        self.state, self.reason, self._first, self._later = JobState.WAITING, "", None, None

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
        if self._first is None:
            return 0
        return max(self._first, max((s for _, s in self._later), default=0)) if self._later \
            else self._first

    @property
    def avg_size(self) -> float:
        """Size averaged over the execution time (the size at start if it ran 0 s)."""
        if self._first is None or self.start is None or self.end is None:
            return math.nan
        total = self.end - self.start
        if total <= 0:
            return float(self._first)
        if not self._later:  # one size all along (a rigid job): no steps to walk
            return self._first * total / total
        return _area(self.sizes, self.end) / total

    def node_seconds(self, until: float | None = None) -> float:
        """Integral of the size over time, from start to the end (or ``until``)."""
        end = self.end if until is None else until
        if end is None:
            return 0.0
        return _area(self.sizes, end)

    @staticmethod
    def _span(a: float | None, b: float | None) -> float:
        return math.nan if a is None or b is None else b - a


def _area(steps: list[tuple[float, int]], end: float) -> float:
    area = 0.0
    for i, (t, s) in enumerate(steps):
        t_next = steps[i + 1][0] if i + 1 < len(steps) else end
        area += s * (min(t_next, end) - t) if t < end else 0.0
    return area
