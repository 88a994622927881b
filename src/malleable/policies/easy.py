"""First come first served with EASY backfilling (Lifka's EASY, Slurm's sched/backfill), pure.

Slurm-like placement for jobs submitted rigid or moldable:

* **What a job asks for** (:func:`submission_range`): a rigid job its size; a
  moldable job ``[min, max]`` (``sbatch -N min-max``); a malleable job
  ``[initial, max]``, so a *flexible* job (DMRlib: malleable, submitted moldable) has
  ``initial = min`` and a *pure malleable* one (submitted rigid at its upper limit)
  has ``initial = max``.
* **Start size** (:func:`start_size`): the largest size in that range that fits the
  free nodes now (Slurm gives a moldable request as many nodes as it can, up to its
  maximum); 0 when even the minimum does not fit. For a malleable job the option
  ``malleable_start`` caps it: ``preferred`` (the policy's default since issue 39: up
  to its preferred size, its maximum without one), ``largest`` (the whole range: the
  default before, and still :func:`easy_schedule`'s, which the DMRlib study runs) or
  ``minimum`` (its initial size); EASY never resizes it afterwards. The default was
  chosen by measurement (``experiment elastic`` on four real logs, docs/policies.md):
  ``largest`` made turnaround worse than the rigid log on every log (+17% to +157% with
  every job malleable), ``minimum`` was best on three logs and worst on LLNL Atlas
  (+40% to +146%), ``preferred`` was never worse than the rigid log by more than 1%.
* **Order.** The manager's queue order (submission order). Jobs start from the head
  while they fit.
* **Reservation.** The first job that does not fit (the head) gets a reservation:
  on the cluster where it can start earliest, the shadow time is the first moment
  when the free nodes plus those of running jobs expected to end by then reach its
  minimum size; the extra nodes are what is free at the shadow time beyond that
  minimum.
* **Backfilling.** Each later job, in queue order, starts now when it fits and
  either is expected to end by the shadow time or uses no more than the extra nodes
  (which it then consumes). So a backfilled job never delays the head's start.
* **Estimates.** A job's expected end is its start plus ``spec.walltime`` (the
  user's limit, counted from the start whatever the size). A job with no wall time
  is expected to run forever, as in Slurm without a time limit: it frees nothing
  before the shadow time and can only backfill into extra nodes. A running job past
  its estimate is expected to end now. Nodes a job is releasing are counted as free
  now in the reservation, not for starting jobs.

:func:`easy_schedule` is the placement pass alone (the DMRlib study's combined policy
runs it before resizing malleable jobs); :class:`EasyPolicy` is the whole policy.
"""

from __future__ import annotations

import math
from bisect import bisect_left, insort
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from malleable.compiling import mypyc_attr
from malleable.model import (
    ClusterView,
    JobKind,
    JobSpec,
    Place,
    RunningJob,
    View,
    WaitingJob,
)
from malleable.policies.base import Negotiating, Steps, answered, infeasible

_MALLEABLE = JobKind.MALLEABLE


def submission_range(spec: JobSpec) -> tuple[int, int]:
    """The sizes a job accepts at start (see the module docstring).

    The minimum is ``initial_size`` for a malleable job, ``min_size`` otherwise (a
    rigid job has ``min_size == max_size``); the placement loop inlines that.
    """
    if spec.kind is JobKind.RIGID:
        return spec.max_size, spec.max_size
    if spec.kind is JobKind.MOLDABLE:
        return spec.min_size, spec.max_size
    return spec.initial_size, spec.max_size


#: Where EASY starts a malleable job (``EasyPolicy.malleable_start``): the largest size of
#: its range that fits, its preferred size (its maximum without one) or below it what fits,
#: or its minimum (the start of its range).
MALLEABLE_STARTS = ("largest", "preferred", "minimum")


def start_size(spec: JobSpec, free: int, malleable_start: str = "largest") -> int:
    """The largest size of the job's range that fits ``free`` nodes (0: it does not fit);
    for a malleable job, capped by ``malleable_start`` (:data:`MALLEABLE_STARTS`)."""
    low, high = submission_range(spec)
    if free < low:
        return 0
    if spec.kind is _MALLEABLE and malleable_start != "largest":
        if malleable_start == "minimum":
            high = low
        elif spec.preferred_size is not None:
            high = max(low, min(high, spec.preferred_size))
    size = spec.size_rule.largest_fit(min(high, free))
    return size if size >= low else 0


def expected_end(start: float, spec: JobSpec, now: float) -> float:
    """When a job started at ``start`` is expected to end (inf without a wall time)."""
    if spec.walltime is None:
        return math.inf
    return max(now, start + spec.walltime)


class Reservation:
    """The head job's reservation: cluster, shadow time and extra nodes (used up by
    backfilled jobs that run past the shadow time)."""

    __slots__ = ("cluster", "extra", "job_id", "shadow")

    def __init__(self, job_id: str, cluster: str, shadow: float, extra: int) -> None:
        self.job_id = job_id
        self.cluster = cluster
        self.shadow = shadow
        self.extra = extra



class Plan:
    """What the placement pass knows within one cycle (free nodes, expected ends).

    ``ends[cluster]`` lists ``(start + wall time, nodes held)`` of the running jobs in
    order (infinite without a wall time); an end already past counts as now.
    ``releasing[cluster]`` counts nodes being released, free now for a reservation.
    Both are read from the view when first asked for (a pass that makes no reservation
    never needs them); the lists may be an :class:`ExpectedEnds` index's own: a start
    copies before it adds.

    It and :class:`Reservation` are plain classes with their ``__init__`` written out:
    compiled, a dataclass's generated ``__init__`` would run interpreted, once a cycle.
    """

    __slots__ = ("_clusters", "_copied", "_ends", "_index", "_releasing", "_starts",
                 "capacity", "free", "now")

    def __init__(self, now: float, free: dict[str, int], capacity: dict[str, int],
                 clusters: Mapping[str, ClusterView], index: ExpectedEnds | None) -> None:
        self.now = now
        self.free = free
        self.capacity = capacity
        self._clusters = clusters
        self._index = index
        self._ends: dict[str, list[tuple[float, int]]] | None = None
        self._releasing: dict[str, int] = {}
        self._copied: set[str] = set()
        self._starts: list[tuple[str, float, int]] = []
        """Starts noted before the ends were read: (cluster, expected end, size)."""

    @classmethod
    def of(cls, view: View, now: float, index: ExpectedEnds | None = None) -> Plan:
        free, capacity = {}, {}
        for name, cluster in view.clusters.items():
            free[name] = cluster.available
            capacity[name] = cluster.nodes - cluster.reserve
        return cls(now, free, capacity, view.clusters, index)

    @property
    def ends(self) -> dict[str, list[tuple[float, int]]]:
        return self._ends if self._ends is not None else self._read_ends()

    @property
    def releasing(self) -> dict[str, int]:
        if self._ends is None:
            self._read_ends()
        return self._releasing

    def _read_ends(self) -> dict[str, list[tuple[float, int]]]:
        index = self._index if self._index is not None else ExpectedEnds()
        ends = self._ends = {}
        for name, cluster in self._clusters.items():
            ends[name], self._releasing[name] = index.of(cluster)
        for cluster_name, end, size in self._starts:
            self._add_end(cluster_name, end, size)
        self._starts.clear()
        return ends

    def started(self, cluster: str, spec: JobSpec, size: int) -> None:
        """Note a start made in this cycle."""
        self.free[cluster] -= size
        if self._ends is None:
            self._starts.append((cluster, _raw_end(self.now, spec), size))
        else:
            self._add_end(cluster, _raw_end(self.now, spec), size)

    def _add_end(self, cluster: str, end: float, size: int) -> None:
        ends = self.ends
        if cluster not in self._copied:
            self._copied.add(cluster)
            ends[cluster] = list(ends[cluster])
        insort(ends[cluster], (end, size))

    def released(self, cluster: str, nodes: int) -> None:
        """Note nodes that became free in this cycle (a shrink with no release delay)."""
        self.free[cluster] += nodes

    def reserve(self, spec: JobSpec) -> Reservation | None:
        """The earliest reservation for ``spec`` over all clusters (None: none holds it)."""
        need = submission_range(spec)[0]
        best: Reservation | None = None
        for name, capacity in self.capacity.items():
            if need > capacity:
                continue
            shadow, free_then = _shadow(self.free[name], self.releasing.get(name, 0),
                                        self.ends[name], need, self.now)
            if best is None or shadow < best.shadow:
                best = Reservation(spec.id, name, shadow, free_then - need)
        return best


def _raw_end(start: float, spec: JobSpec) -> float:
    """Start plus wall time (inf without one); :func:`expected_end` without the clamp."""
    return math.inf if spec.walltime is None else start + spec.walltime


class ExpectedEnds:
    """The running jobs' expected ends per cluster, kept in order as jobs start, resize
    and end, so that a cycle does not rebuild and sort them (EASY's hot spot).

    It learns the changes by comparing each view's running jobs with the last ones by
    identity (a view's :class:`RunningJob` is immutable: a resized job is a new one),
    only those of the ids the view's change log lists when it continues the log of the
    last view seen (:attr:`ClusterView.changes`), else all of them.
    Only a cache: a plan is the same with a fresh index or with a long-lived one.
    """

    __slots__ = ("_ends", "_jobs", "_logged", "_releasing", "_seen")

    def __init__(self) -> None:
        self._seen: dict[str, Mapping[str, RunningJob]] = {}
        self._logged: dict[str, tuple[Sequence[str], int] | None] = {}
        self._jobs: dict[str, dict[str, RunningJob]] = {}
        self._ends: dict[str, list[tuple[float, int]]] = {}
        self._releasing: dict[str, int] = {}

    def of(self, cluster: ClusterView) -> tuple[list[tuple[float, int]], int]:
        """The sorted ends and the nodes being released of ``cluster`` (not to be changed)."""
        name, running = cluster.name, cluster.running
        if self._seen.get(name) is not running:
            changes, last = cluster.changes, self._logged.get(name)
            if (changes is not None and last is not None and last[0] is changes[0]
                    and last[1] <= changes[1]):  # (an older view: compare everything)
                self._follow(name, running, changes[0][last[1]:changes[1]])
            else:
                self._sync(name, running)
            self._seen[name] = running
            self._logged[name] = changes
        return self._ends[name], self._releasing[name]

    def _follow(self, name: str, running: Mapping[str, RunningJob],
                changed: Sequence[str]) -> None:
        """Take in the jobs of ``changed`` (ids, maybe repeated): the others are as seen."""
        jobs, ends = self._jobs[name], self._ends[name]
        releasing = self._releasing[name]
        for job_id in changed:
            old, job = jobs.get(job_id), running.get(job_id)
            if old is job:
                continue
            if old is not None:
                releasing -= _drop(ends, old)
                del jobs[job_id]
            if job is not None:
                releasing += _add(ends, job)
                jobs[job_id] = job
        self._releasing[name] = releasing

    def _sync(self, name: str, running: Mapping[str, RunningJob]) -> None:
        jobs = self._jobs.setdefault(name, {})
        ends = self._ends.setdefault(name, [])
        releasing = self._releasing.get(name, 0)
        for job_id in jobs.keys() - running.keys():
            releasing -= _drop(ends, jobs.pop(job_id))
        known = jobs.get
        for job_id, job in running.items():
            old = known(job_id)
            if old is job:
                continue
            if old is not None:
                releasing -= _drop(ends, old)
            jobs[job_id] = job
            releasing += _add(ends, job)
        self._releasing[name] = releasing


def _add(ends: list[tuple[float, int]], job: RunningJob) -> int:
    """Put ``job``'s entry into ``ends``; the nodes it is releasing."""
    held = job.size - job.releasing
    if held > 0:
        insort(ends, (_raw_end(job.start_time, job.spec), held))
    return int(job.releasing)


def _drop(ends: list[tuple[float, int]], job: RunningJob) -> int:
    """Take ``job``'s entry out of ``ends``; the nodes it was releasing."""
    held = job.size - job.releasing
    if held > 0:
        del ends[bisect_left(ends, (_raw_end(job.start_time, job.spec), held))]
    return int(job.releasing)


def _shadow(free: int, releasing: int, ends: list[tuple[float, int]], need: int,
            now: float) -> tuple[float, int]:
    """(shadow time, nodes free then) for a job needing ``need`` nodes.

    Nodes being released and jobs past their expected end count as free now; every job
    expected to end at the shadow time counts in the nodes free then.
    """
    if free >= need:
        return now, free
    free += releasing
    count = len(ends)
    i = 0
    while i < count and ends[i][0] <= now:
        free += ends[i][1]
        i += 1
    if free >= need:
        return now, free
    while i < count:
        end, nodes = ends[i]
        free += nodes
        i += 1
        if free >= need:
            while i < count and ends[i][0] == end:
                free += ends[i][1]
                i += 1
            return end, free
    return math.inf, free


def easy_schedule(queue: Sequence[WaitingJob], plan: Plan,
                  malleable_start: str = "largest",
                  keep: bool = True) -> Negotiating[list[WaitingJob]]:
    """Place what FCFS + EASY allows; return the jobs left waiting, in order (malleable
    jobs start at the size ``malleable_start`` says: :func:`start_size`). With ``keep``
    False, an empty list: the pass does not note them (EasyPolicy, which does not use
    them, walks its whole queue each cycle: an append a job it passes)."""
    order = list(queue)
    largest = max(plan.capacity.values(), default=0)
    left: list[WaitingJob] = []
    head: JobSpec | None = None  # the first job left waiting
    reservation: Reservation | None = None  # the head's, made when a later job could start
    most_free = max(plan.free.values(), default=0)
    sure, by = most_free, math.inf  # (no reservation: see _bounds)
    now = plan.now
    # Free and extra nodes only shrink during a pass, so a job that could not start
    # cannot either for any later job asking the same (sizes, rule, wall time).
    failed: set[tuple[int, int, int, float | None]] = set()
    for i, waiting in enumerate(order):
        if most_free <= 0 and head is not None:
            # nothing can start: the rest waits as it is (a job too big for every
            # cluster is rejected in a later cycle, when the scan reaches it)
            return left + order[i:] if keep else left
        spec = waiting.spec
        low = spec.initial_size if spec.kind is _MALLEABLE else spec.min_size
        if low > most_free:
            if low > largest:
                reject = infeasible(spec.id, low, largest)
                if reject is not None:
                    yield reject
                continue
            if keep:
                left.append(waiting)  # the common, fast case
            if head is None:
                head = spec
            continue
        if head is not None and reservation is None:
            # nothing started since the head was left waiting: as if made then
            reservation = plan.reserve(head)
            if reservation is not None:
                sure, by = _bounds(plan, reservation)
        if low > sure:  # it fits only where it must end by the shadow time
            walltime = spec.walltime
            if walltime is None or now + walltime > by:
                if keep:
                    left.append(waiting)  # (there is a reservation: sure < most_free)
                continue
        # the rule by identity: Enum.__hash__ and .value are Python code
        key = (low, spec.max_size, id(spec.size_rule), spec.walltime)
        if key in failed or not (yield from _try_start(spec, plan, reservation,
                                                       malleable_start)):
            failed.add(key)
            if keep:
                left.append(waiting)
            if head is None:
                head = spec
            continue
        most_free = max(plan.free.values())
        if reservation is not None:  # (without one, a larger sure changes nothing)
            sure, by = _bounds(plan, reservation)
    return left


def _bounds(plan: Plan, reservation: Reservation) -> tuple[int, float]:
    """What a backfill candidate is checked against, as :func:`_try_start` would find it:
    the most nodes it may take on any cluster if it ends after the shadow time (the
    extra nodes at most on the reservation's cluster), and the latest expected end that
    counts as ending by the shadow time (-inf when the shadow time is infinite, as
    :func:`_ends_late` has it). The shadow time is never before now, so ``now + wall
    time`` is the expected end :func:`expected_end` gives. (Without a reservation, they
    are the most free nodes and infinity.)"""
    sure = 0
    for name, free in plan.free.items():
        if name == reservation.cluster and reservation.extra < free:
            free = reservation.extra
        if free > sure:
            sure = free
    shadow = reservation.shadow
    return sure, shadow if shadow < math.inf else -math.inf


def _ends_late(spec: JobSpec, now: float, reservation: Reservation) -> bool:
    """Does ``spec``, started now, end after the shadow time? (With an unknown end on
    either side, nothing ends "before".)"""
    return expected_end(now, spec, now) > reservation.shadow or math.isinf(reservation.shadow)


def _try_start(spec: JobSpec, plan: Plan, reservation: Reservation | None,
               malleable_start: str = "largest") -> Negotiating[bool]:
    """Start ``spec`` now where allowed (most free nodes first); True when it started."""
    free = plan.free
    for name in free if len(free) == 1 else sorted(free, key=lambda n: -free[n]):
        limit = plan.free[name]
        ends_late = False
        if reservation is not None and reservation.cluster == name:
            ends_late = _ends_late(spec, plan.now, reservation)
            if ends_late:
                limit = min(limit, reservation.extra)
        size = start_size(spec, limit, malleable_start)
        if not size:
            continue
        granted = answered((yield Place(spec.id, name, size)))
        if not granted:
            continue
        plan.started(name, spec, granted)
        if ends_late and reservation is not None:
            reservation.extra -= granted
        return True
    return False


@mypyc_attr(allow_interpreted_subclasses=True)  # a policy to build on (setup.py)
@dataclass
class EasyPolicy:
    """FCFS with EASY backfilling; moldable jobs start at the largest size that fits now,
    malleable ones at the size ``malleable_start`` says (:data:`MALLEABLE_STARTS`)."""

    malleable_start: str = "preferred"

    def __post_init__(self) -> None:
        if self.malleable_start not in MALLEABLE_STARTS:
            raise ValueError(f"malleable_start {self.malleable_start!r}: one of "
                             f"{', '.join(MALLEABLE_STARTS)}")

    @property
    def name(self) -> str:
        return "easy"

    _ends: ExpectedEnds = field(default_factory=ExpectedEnds, init=False, repr=False,
                                compare=False)

    def decide(self, view: View, now: float) -> Steps:
        if not view.waiting:
            return
        if _nothing_free(view):
            yield from _too_big_ahead(view)  # what the pass does then, without a plan
            return
        plan = Plan.of(view, now, self._ends)
        yield from easy_schedule(view.waiting, plan, self.malleable_start, keep=False)


def _nothing_free(view: View) -> bool:
    """No free node on any cluster (a loop: all() over a generator costs more per cycle)."""
    for cluster in view.clusters.values():  # noqa: SIM110
        if cluster.available > 0:
            return False
    return True


def _too_big_ahead(view: View) -> Steps:
    """The pass with no free node anywhere: the jobs too big for every cluster ahead of
    the first that fits one are rejected; that one gets the reservation, and nothing
    can start (the index of expected ends catches up in the next pass it serves)."""
    largest = max((c.nodes - c.reserve for c in view.clusters.values()), default=0)
    for waiting in view.waiting:
        reject = infeasible(waiting.id, submission_range(waiting.spec)[0], largest)
        if reject is None:
            return
        yield reject


def easy(malleable_start: str = "preferred") -> EasyPolicy:
    """FCFS with EASY backfilling (Slurm-like); moldable jobs take the most nodes free now,
    malleable ones start at ``malleable_start``: largest (that fits), preferred, minimum."""
    if malleable_start not in MALLEABLE_STARTS:
        from malleable.errors import InputError

        raise InputError(f"malleable_start={malleable_start!r}: give one of "
                         f"{', '.join(MALLEABLE_STARTS)}")
    return EasyPolicy(malleable_start)

