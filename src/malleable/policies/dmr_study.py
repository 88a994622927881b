"""The DMRlib study's scheduler: Slurm's EASY backfilling plus DMRlib's resize rule.

Each cycle, as Slurm with the DMR plug-in would:

1. **Placement.** :func:`~malleable.policies.easy.easy_schedule` starts waiting jobs
   first come first served with EASY backfilling; moldable submissions (pure
   moldable and flexible jobs) take the most nodes free now within their range.
2. **Resizes.** Each running malleable job, oldest first, that is at a
   reconfiguration point gets Algorithm 2
   (:func:`~malleable.policies.dmr.dmr_resize`) with the nodes left free and the
   minimum sizes of the jobs still waiting. A job is at a reconfiguration point when
   at least ``interval(spec, size)`` seconds have passed since it last changed size
   (DMRlib's scheduling-period inhibitor, or one iteration for coarse-grained
   applications); with the simulator's periodic poll this approximates checks made
   every period.
3. **Priority to the job a shrink makes room for.** "The additional one,
   responsible for the shrinking, is assigned the highest priority to run": it
   starts at once on the released nodes, ahead of the queue head. (So, unlike
   :class:`~malleable.policies.easy.EasyPolicy` alone, the combined policy can delay
   the head: the paper's Slurm does too.)

**Granularity.** The paper limits reconfigurations "to values multiple or divisible
of the number of parent processes": with ``multiples=True`` (the default) an
expansion goes to the largest multiple of the current size that the free nodes and
the upper limit allow, and a shrink to the largest divisor of the current size that
still lets the waiting job start and is not below the preferred size. When no
divisor works, the job is treated as Algorithm 2's line 9 says (expand if free).
``multiples=False`` uses :func:`dmr_resize`'s any-to-any sizes.

**Two readings of the shrink rule.** Algorithm 2, read literally (the default), shrinks
a job only if *its own* shrink plus the free nodes lets a waiting job start: with
waiting jobs of 32 nodes a packed cluster rarely has the rest free, so malleable jobs
run near their maximum like fixed ones. ``pooled=True`` is the other reading: after the
literal pass, while a job waits, the running jobs at a reconfiguration point that are
above their preferred size shrink toward it (with ``multiples``: to the smallest divisor
of their size at or above it), oldest first, until their shrinks *added up* with the
free nodes let the first waiting job start; nothing shrinks when all of them together
would not be enough. The job then starts at once, as in the literal reading.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from malleable.model import (
    Grow,
    JobKind,
    JobSpec,
    Place,
    RunningJob,
    Shrink,
    View,
    WaitingJob,
)
from malleable.policies.base import Negotiating, Steps, answered
from malleable.policies.dmr import JobLimits, Resize, ResizeKind, dmr_resize, limits_of
from malleable.policies.easy import Plan, easy_schedule, start_size

Interval = Callable[[JobSpec, int], float]


def no_inhibitor(spec: JobSpec, size: int) -> float:
    """Every cycle is a reconfiguration point."""
    return 0.0


def granular_resize(current: int, limits: JobLimits, available: int,
                    pending: list[int]) -> Resize:
    """Algorithm 2 with resizes limited to multiples and divisors of ``current``."""
    decision = dmr_resize(current, limits, available, pending)
    if decision.kind is ResizeKind.EXPAND:
        return _expand_multiple(current, limits, decision.target)
    if decision.kind is ResizeKind.SHRINK and decision.pending_index is not None:
        for index in range(decision.pending_index, len(pending)):
            missing = pending[index] - available
            target = _divisor_at_most(current, current - missing, limits)
            if missing > 0 and target:
                return Resize(ResizeKind.SHRINK, target, index)
        return _expand_multiple(current, limits, min(limits.maximum, current + available))
    return decision


def _expand_multiple(current: int, limits: JobLimits, ceiling: int) -> Resize:
    target = (ceiling // current) * current
    while target > current and limits.size_rule.largest_fit(target) != target:
        target -= current
    if target > current:
        return Resize(ResizeKind.EXPAND, target)
    return Resize(ResizeKind.NONE, current)


def _divisor_at_most(current: int, ceiling: int, limits: JobLimits) -> int:
    """The largest divisor of ``current`` in [preferred, ceiling] the job accepts (0: none)."""
    for k in range(2, current + 1):
        target = current // k
        if current % k or target > ceiling:
            continue
        if target < max(limits.preferred, limits.minimum):
            return 0
        if limits.size_rule.largest_fit(target) == target:
            return target
    return 0


@dataclass
class EasyDmrPolicy:
    """Slurm-like EASY backfilling plus DMRlib's Algorithm 2 for running malleable jobs."""

    interval: Interval = field(default=no_inhibitor)
    multiples: bool = True
    pooled: bool = False

    @property
    def name(self) -> str:
        return "easy-dmr"

    def decide(self, view: View, now: float) -> Steps:
        plan = Plan.of(view, now)
        left = yield from easy_schedule(list(view.waiting), plan)
        for name, cluster in view.clusters.items():
            due = [j for j in cluster.malleable_jobs() if self.at_point(j, now)]
            if due:
                yield from self._resize_cluster(due, plan, left, name)

    def at_point(self, job: RunningJob, now: float) -> bool:
        """Whether the job is at a reconfiguration point now (see the module docstring)."""
        if job.releasing or job.growing:
            return False
        since = job.resized_at if job.resized_at is not None else job.start_time
        return now - since >= self.interval(job.spec, job.size)

    def _resize_cluster(self, due: list[RunningJob], plan: Plan, left: list[WaitingJob],
                        name: str) -> Steps:
        records = candidates(left, plan.capacity[name])
        sizes = [low for _, low in records]
        rule = granular_resize if self.multiples else dmr_resize
        for job in due:
            if self._idle(job, plan.free[name], bool(sizes)):
                continue
            decision = rule(job.size, limits_of(job), plan.free[name], sizes)
            if decision.kind is ResizeKind.EXPAND:
                accepted = answered((yield Grow(job.id, decision.target - job.size)))
                plan.free[name] -= accepted
            elif decision.kind is ResizeKind.SHRINK and decision.pending_index is not None:
                released = answered((yield Shrink(job.id, job.size - decision.target)))
                plan.released(name, released)
                index = records[decision.pending_index][0]
                if (yield from self._start(left[index].spec, plan, name)):
                    del left[index]
                    records = candidates(left, plan.capacity[name])
                    sizes = [low for _, low in records]
        if self.pooled and records:
            yield from self._pool(due, plan, left, records[0][0], name)

    def _pool(self, due: list[RunningJob], plan: Plan, left: list[WaitingJob], index: int,
              name: str) -> Steps:
        """The pooled reading: several shrinks toward the preferred size add up to start
        ``left[index]`` (the first job the rule looks at); none if they cannot."""
        spec = left[index].spec
        low = spec.initial_size if spec.kind is JobKind.MALLEABLE else spec.min_size
        gap = low - plan.free[name]
        if gap <= 0:
            return
        gives = [(job, job.size - self._pooled_target(job)) for job in due]
        gives = [(job, give) for job, give in gives if give > 0]
        if sum(give for _, give in gives) < gap:
            return
        for job, give in gives:
            if plan.free[name] >= low:
                break
            released = answered((yield Shrink(job.id, give)))
            plan.released(name, released)
        if plan.free[name] >= low and (yield from self._start(spec, plan, name)):
            del left[index]

    def _pooled_target(self, job: RunningJob) -> int:
        """The size a job shrinks to in the pooled reading (its size when it cannot)."""
        limits = limits_of(job)
        floor = max(limits.preferred, limits.minimum)
        if job.size <= floor:
            return job.size
        if not self.multiples:
            return floor
        best = job.size
        for k in range(2, job.size + 1):
            target = job.size // k
            if job.size % k == 0 and target >= floor \
                    and limits.size_rule.largest_fit(target) == target:
                best = target
        return best

    def _idle(self, job: RunningJob, free: int, pending: bool) -> bool:
        """True when Algorithm 2 surely answers none (spares evaluating it).

        A job can grow only with free nodes (with multiples: at least its size) and
        shrinks only above its preferred size for a waiting job.
        """
        needed = job.size if self.multiples else 1
        preferred = job.spec.preferred_size or job.spec.initial_size
        return free < needed and not (pending and job.size > preferred)

    def _start(self, spec: JobSpec, plan: Plan, name: str) -> Negotiating[bool]:
        size = start_size(spec, plan.free[name])
        if not size:
            return False
        granted = answered((yield Place(spec.id, name, size)))
        if granted:
            plan.started(name, spec, granted)
        return bool(granted)


def candidates(queue: Sequence[WaitingJob], capacity: int) -> list[tuple[int, int]]:
    """(index, minimum size) of the waiting jobs Algorithm 2 needs to see, in queue order.

    Whether a pending job "can be initiated" after a shrink depends only on its
    minimum size, and the smaller the size the easier; so the first job the rule could
    pick is always one smaller than every job before it. Only those jobs are kept
    (it spares scanning long queues at every reconfiguration point).
    """
    kept: list[tuple[int, int]] = []
    smallest = capacity + 1
    for index, waiting in enumerate(queue):
        spec = waiting.spec
        low = spec.initial_size if spec.kind is JobKind.MALLEABLE else spec.min_size
        if low < smallest:
            kept.append((index, low))
            smallest = low
            if low <= 1:
                break
    return kept


def easy_dmr(multiples: bool = True, pooled: bool = False) -> EasyDmrPolicy:
    """EASY backfilling + DMRlib's Algorithm 2 (no inhibitor; resizes to multiples/divisors)."""
    return EasyDmrPolicy(multiples=multiples, pooled=pooled)
