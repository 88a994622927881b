"""DMRlib's resize rule (Iserte et al., Algorithm 2) as a pure policy.

Algorithm 2 decides, when a job reaches a reconfiguration point, whether to
expand it, shrink it or leave it:

.. code-block:: text

    1: if current < preferred then
    2:     if avail_resources then return expand
    3: else
    4:     if pending_jobs then
    5:         if current > preferred then
    6:             if an additional job can be initiated then return shrink
    7:         else
    8:             if avail_resources then return expand
    9:         if avail_resources then return expand
   10:     else
   11:         if avail_resources then return expand

Lines 7-9 collapse to "otherwise expand when resources are free". How we read the
paper where it leaves room (section 5.1):

* **Expand** grows the job toward its upper limit with the free nodes:
  ``target = min(maximum, current + available)`` (then the application's size rule).
* **Pending jobs first.** Slurm starts a pending job as soon as it fits; the rule
  runs after that. So if a pending job fits in the free nodes already, those nodes
  are its, and the rule does not expand into them (it answers none).
* **Shrink** "never with fewer processes than preferred", and only when the nodes
  it releases plus the free ones let a pending job start: the job gives back just
  what that job misses (the first such job in queue order), rounded by its size
  rule and never below preferred.

:func:`dmr_resize` is the rule for one job (the simulator of the DMRlib study and
the MPI library's ``DmrSource`` call it directly). :class:`DmrPolicy` applies it to
every running malleable job the manager runs, oldest first, and places waiting jobs
first come first served, as Slurm would.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass

from malleable.model import (
    ClusterView,
    Defer,
    Grow,
    Place,
    RunningJob,
    Shrink,
    SizeRule,
    View,
)
from malleable.policies.base import Negotiating, Steps, answered, infeasible, largest_offer
from malleable.policies.koala import start_size


class ResizeKind(enum.Enum):
    """What Algorithm 2 returns."""

    EXPAND = "expand"
    """Grow the job to ``target``."""
    SHRINK = "shrink"
    """Shrink the job to ``target`` so that a pending job can start."""
    NONE = "none"
    """Leave the job as it is."""


@dataclass(frozen=True, slots=True)
class Resize:
    """A decision of the rule: the kind and the new total size (``current`` for none)."""

    kind: ResizeKind
    target: int
    pending_index: int | None = None
    """For a shrink: which pending job (index in the list given) it makes room for."""


@dataclass(frozen=True, slots=True)
class JobLimits:
    """A job's malleability parameters as the rule sees them."""

    minimum: int
    maximum: int
    preferred: int
    size_rule: SizeRule = SizeRule.ANY

    def __post_init__(self) -> None:
        if not 1 <= self.minimum <= self.preferred <= self.maximum:
            raise ValueError(f"need 1 <= minimum {self.minimum} <= preferred {self.preferred} "
                             f"<= maximum {self.maximum}")


def dmr_resize(current: int, limits: JobLimits, available: int,
               pending: Sequence[int] = ()) -> Resize:
    """Algorithm 2 for one job.

    ``available`` counts free nodes; ``pending`` lists the sizes (minimum node
    counts) of the jobs waiting, in queue order. Pure: the same inputs always give
    the same answer.
    """
    if current < 1:
        raise ValueError(f"current size {current} is below 1")
    available = max(0, available)
    if current < limits.preferred or not pending:  # lines 1-2, 10-11
        return _expand(current, limits, available)
    if any(size <= available for size in pending):
        return Resize(ResizeKind.NONE, current)  # the free nodes belong to a pending job
    if current > limits.preferred:  # lines 5-6
        shrink = _shrink_for(current, limits, available, pending)
        if shrink is not None:
            return shrink
    return _expand(current, limits, available)  # lines 7-9


def _expand(current: int, limits: JobLimits, available: int) -> Resize:
    if available <= 0 or current >= limits.maximum:
        return Resize(ResizeKind.NONE, current)
    target = limits.size_rule.largest_fit(min(limits.maximum, current + available))
    if target <= current:
        return Resize(ResizeKind.NONE, current)
    return Resize(ResizeKind.EXPAND, target)


def _shrink_for(current: int, limits: JobLimits, available: int,
                pending: Sequence[int]) -> Resize | None:
    """The smallest shrink (not below preferred) that lets the first possible pending job start."""
    for index, size in enumerate(pending):
        missing = size - available
        target = limits.size_rule.largest_fit(current - missing)
        if missing > 0 and target >= limits.preferred:
            return Resize(ResizeKind.SHRINK, target, index)
    return None


def limits_of(job: RunningJob) -> JobLimits:
    """A running job's limits (preferred defaults to the initial size)."""
    spec = job.spec
    preferred = spec.preferred_size if spec.preferred_size is not None else spec.initial_size
    return JobLimits(spec.min_size, spec.max_size, preferred, spec.size_rule)


@dataclass
class DmrPolicy:
    """DMRlib: grow toward the upper limit on free nodes, shrink to preferred for waiting jobs.

    Each cycle: place waiting jobs first come first served on the cluster with the
    most free nodes (first-fit in queue order, like Slurm's FIFO with backfilling
    of smaller jobs); then, on every cluster, apply :func:`dmr_resize` to each
    running malleable job, oldest first. A job still releasing nodes is left alone;
    nodes being released count toward the pending jobs they were released for.
    """

    @property
    def name(self) -> str:
        return "dmr"

    def decide(self, view: View, now: float) -> Steps:
        avail = {name: c.available for name, c in view.clusters.items()}
        unplaced = yield from self._place(view, avail)
        for name, cluster in view.clusters.items():
            avail[name] = yield from self._resize_cluster(cluster, avail[name], unplaced)

    def _place(self, view: View, avail: dict[str, int]) -> Negotiating[list[int]]:
        """Place waiting jobs in queue order; return the sizes of those left waiting."""
        largest = largest_offer(view)
        unplaced: list[int] = []
        for waiting in view.waiting:
            spec = waiting.spec
            reject = infeasible(spec.id, spec.min_size, largest)
            if reject is not None:
                yield reject
                continue
            where = max(avail, key=lambda n: avail[n], default="")
            size = start_size(spec, avail[where]) if where else 0
            granted = answered((yield Place(spec.id, where, size))) if size else 0
            if granted:
                avail[where] -= granted
            else:
                yield Defer(spec.id)
                unplaced.append(spec.min_size)
        return unplaced

    def _resize_cluster(self, cluster: ClusterView, available: int,
                        pending: list[int]) -> Negotiating[int]:
        """Apply the rule to each malleable job of one cluster; return nodes still free."""
        fits = [size for size in pending if size <= cluster.nodes - cluster.reserve]
        coming = sum(j.releasing for j in cluster.running.values())
        for job in cluster.malleable_jobs():
            if job.releasing or job.growing:
                continue
            decision = dmr_resize(job.size, limits_of(job), available + coming, fits)
            if decision.kind is ResizeKind.EXPAND:
                offer = min(decision.target - job.size, available)
                if offer > 0:
                    available -= answered((yield Grow(job.id, offer)))
            elif decision.kind is ResizeKind.SHRINK and decision.pending_index is not None:
                released = answered((yield Shrink(job.id, job.size - decision.target)))
                available, coming = _claim(fits, decision.pending_index, available,
                                           coming + released)
        return available


def _claim(pending: list[int], index: int, available: int, coming: int) -> tuple[int, int]:
    """Give pending job ``index`` the nodes being released first, then free ones.

    Returns the free and the coming nodes left for other jobs; the pending job leaves
    ``pending`` when it is covered.
    """
    need = pending[index]
    if available + coming < need:
        return available, coming
    pending.pop(index)
    from_coming = min(coming, need)
    return available - (need - from_coming), coming - from_coming


def dmr() -> DmrPolicy:
    """DMRlib's Algorithm 2: expand on free nodes, shrink toward preferred for waiting jobs."""
    return DmrPolicy()
