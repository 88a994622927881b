"""KOALA's job management (section V-B): worst-fit placement with the PRA, PWA or
no-malleability approach, and one malleability policy applied per cluster.

``decide`` is a generator: it yields placements and offers and receives the
answers, keeping its own count of the nodes each cluster has left in this cycle.

How we read the paper where it leaves room:

* **Placement queue.** Scanned head to tail whenever the policy runs; a job is
  placed (worst fit: the cluster with the most available nodes) as soon as a
  cluster has at least its minimum available. A malleable job starts at its
  initial size, or at what is available if that is less (never below its minimum);
  a rigid job at its size; a moldable job at the largest size available up to its
  maximum. A job that cannot be placed counts a try (:class:`Defer`).
* **Reserve.** Nodes in a cluster's reserve are never used (``ClusterView.available``).
* **PRA.** Available nodes first go to growing the cluster's running malleable jobs;
  a waiting malleable job is then placed only on a cluster where no running
  malleable job would still take more (that is, "can still be grown" with what is
  there). Rigid jobs use what the growth left. Never shrinks.
* **PWA.** The queue is scanned first. For the first job that still cannot be
  placed, the cluster where mandatory shrinks (down to the running jobs' minimum
  sizes) plus what is available and already being released would make room is
  chosen (most room first) and its jobs are asked to shrink by the missing amount.
  If no cluster can make room, or the queue is empty, available nodes grow the
  running jobs, as in PRA. Nodes being released are waited for, not reused.
* **none.** Placement only; malleable jobs keep their initial size.
* **Growth threshold** (option ``grow_threshold``, off at 1.0): "a threshold is set
  over which KOALA never expands the total set of the jobs it manages". Grows stop
  once the managed jobs hold that fraction of the platform's nodes; placements do not
  count against it (the placement reserve is the clusters' ``reserve``).
* **Growth cap** (option ``grow_cap``, off at 0; a reading, not the paper's setting): a
  malleable job is never grown past ``grow_cap`` times its initial size (nor past its
  maximum). The paper chose maximum sizes above those of the best execution times, as
  "users may not be aware of the speedup behavior of their applications" (VI-C); a cap
  on growth relative to what the user asked for is the scheduler's guard against that.
  A job at its cap is not growable (so under PRA a malleable job may be placed beside
  it), and offers to it are cut to its cap (EGS's shares are not redistributed).
* **Counts.** ``counts`` tallies, over the policy's life, the grow decisions (a
  cluster with free nodes and at least one job that would take some) and those with
  more than one such candidate: the only ones where FPSMA and EGS can differ.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field

from malleable.compiling import mypyc_attr
from malleable.model import (
    ClusterView,
    Defer,
    Grow,
    JobKind,
    JobSpec,
    Place,
    RunningJob,
    Shrink,
    View,
)
from malleable.policies.base import (
    Negotiating,
    Steps,
    answered,
    infeasible,
    largest_offer,
    relay,
)
from malleable.policies.malleability import (
    FPSMA,
    MALLEABILITY_POLICIES,
    MalleabilityPolicy,
    Negotiation,
)

#: The keys of :attr:`KoalaPolicy.counts`.
COUNTS = ("grow_decisions", "grow_decisions_multi")


class Approach(enum.Enum):
    """When the malleability policy is initiated (KOALA section V-B)."""

    PRA = "pra"
    """Precedence to running applications: grow running jobs first, never shrink."""
    PWA = "pwa"
    """Precedence to waiting applications: mandatory shrinks make room for the next job."""
    NONE = "none"
    """No malleability: the baseline."""


def start_size(spec: JobSpec, available: int) -> int:
    """The size a job starts with given ``available`` nodes (0: it cannot start)."""
    if available < spec.min_size:
        return 0
    if spec.kind is JobKind.RIGID:
        return spec.max_size
    if spec.kind is JobKind.MOLDABLE:
        return spec.size_rule.largest_fit(min(spec.max_size, available))
    return max(spec.min_size, spec.size_rule.largest_fit(min(spec.initial_size, available)))


@mypyc_attr(allow_interpreted_subclasses=True)  # a policy to build on (setup.py)
@dataclass
class KoalaPolicy:
    """KOALA's manager: an approach, worst-fit placement and a malleability policy."""

    approach: Approach = Approach.PRA
    malleability: MalleabilityPolicy = field(default_factory=FPSMA)
    grow_threshold: float = 1.0
    grow_cap: float = 0.0
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(COUNTS, 0),
                                   compare=False, repr=False)
    growable: _Growable = field(default_factory=lambda: _Growable(), compare=False,
                                repr=False)

    def __post_init__(self) -> None:
        if not 0.0 < self.grow_threshold <= 1.0:
            raise ValueError(f"grow_threshold must be in (0, 1], not {self.grow_threshold}")
        if self.grow_cap != 0.0 and not self.grow_cap >= 1.0:
            raise ValueError(f"grow_cap must be 0 (off) or at least 1, not {self.grow_cap}")
        self.growable.cap = self.grow_cap

    @property
    def name(self) -> str:
        return f"koala-{self.approach.value}-{self.malleability.name}"

    @classmethod
    def named(cls, approach: str, policy: str, grow_threshold: float = 1.0,
              grow_cap: float = 0.0) -> KoalaPolicy:
        """Build from names (``pra``/``pwa``/``none``, ``fpsma``/``egs``/``equipartition``)."""
        try:
            appr = Approach(approach)
        except ValueError:
            valid = ", ".join(a.value for a in Approach)
            raise ValueError(f"unknown approach {approach!r}; valid: {valid}") from None
        if policy not in MALLEABILITY_POLICIES:
            valid = ", ".join(MALLEABILITY_POLICIES)
            raise ValueError(f"unknown malleability policy {policy!r}; valid: {valid}")
        return cls(appr, MALLEABILITY_POLICIES[policy](), grow_threshold, grow_cap)

    # ------------------------------------------------------------------ decide

    def decide(self, view: View, now: float) -> Steps:
        cycle = _Cycle({name: c.available for name, c in view.clusters.items()})
        cycle.cap = self.grow_cap
        if self.grow_threshold < 1.0:
            cycle.limit = self._grow_limit(view)
            cycle.managed = sum(j.size + j.growing - j.releasing for c in view.clusters.values()
                                for j in c.running.values() if j.managed)
        if self.approach is Approach.PRA:
            yield from self._grow_all(view.clusters, cycle)
        blocked = None
        if view.waiting:  # most cycles of a malleable run: nothing waits, nothing to place
            blocked = yield from self._place_queue(view, cycle, largest_offer(view))
        if self.approach is Approach.PWA:
            made_room = False
            if blocked is not None:
                made_room = yield from self._make_room(view.clusters, cycle, blocked)
            if not made_room:
                yield from self._grow_all(view.clusters, cycle)

    def _place_queue(self, view: View, cycle: _Cycle,
                     largest: int) -> Negotiating[JobSpec | None]:
        """Place what fits, head to tail; return the first job that did not fit."""
        first_blocked: JobSpec | None = None
        for waiting in view.waiting:
            spec = waiting.spec
            reject = infeasible(spec.id, spec.min_size, largest)
            if reject is not None:
                yield reject
                continue
            cluster = self._worst_fit(view.clusters, cycle, spec)
            size = start_size(spec, cycle.avail[cluster]) if cluster else 0
            granted = answered((yield Place(spec.id, cluster, size))) if size else 0
            if granted:
                cycle.avail[cluster] -= granted
                cycle.managed += granted
                continue
            yield Defer(spec.id)
            if first_blocked is None:
                first_blocked = spec
        return first_blocked

    def _worst_fit(self, clusters: Mapping[str, ClusterView], cycle: _Cycle,
                   spec: JobSpec) -> str:
        """The eligible cluster with the most available nodes ("" when none)."""
        best, most = "", -1
        for name, cluster in clusters.items():
            if (self.approach is Approach.PRA and spec.malleable
                    and cycle.can_still_grow(name, self.growable.of(name, cluster))):
                continue
            if cycle.avail[name] > most:
                best, most = name, cycle.avail[name]
        return best

    def _grow_limit(self, view: View) -> int:
        """The managed jobs' total size over which nothing grows; counts what they hold."""
        total = sum(c.nodes for c in view.clusters.values())
        return int(self.grow_threshold * total)

    def _grow_all(self, clusters: Mapping[str, ClusterView], cycle: _Cycle) -> Steps:
        avail, no_limit = cycle.avail, cycle.limit is None  # the limit is fixed for a cycle
        # The answers go into the cycle's sizes only where something reads them later:
        # PRA's placement (can_still_grow) and the threshold (grow_budget). PWA's grows are
        # the decision's last actions, and the grow list is the view's (_Growable).
        noted = self.approach is Approach.PRA or not no_limit
        for name, cluster in clusters.items():
            # grow_budget's value without its call when no threshold caps it (once per
            # cluster, every cycle)
            value = avail[name] if no_limit else cycle.grow_budget(name)
            if value <= 0:
                continue
            jobs = self.growable.of(name, cluster)
            if jobs:
                self._count(jobs, value)
                grow = self.malleability.grow(jobs, value)
                if self.grow_cap:
                    grow = _capped(grow, {j.id: ceiling(j.spec, self.grow_cap) for j in jobs},
                                   {j.id: cycle.size(j) for j in jobs})
                accepted = yield from (cycle.relay(grow) if noted else grow)
                avail[name] -= accepted

    def _count(self, jobs: tuple[RunningJob, ...], value: int) -> None:
        """Count a grow decision, and one with more than one candidate (``jobs``'
        sizes are their views': see :class:`_Growable`)."""
        candidates = 0
        for job in jobs:
            if _accepts(job.spec, job.size + job.growing, value, self.grow_cap) > 0:
                candidates += 1
                if candidates > 1:  # all that is counted: stop here
                    break
        if candidates:
            self.counts["grow_decisions"] += 1
        if candidates > 1:
            self.counts["grow_decisions_multi"] += 1

    def _make_room(self, clusters: Mapping[str, ClusterView], cycle: _Cycle,
                   spec: JobSpec) -> Negotiating[bool]:
        """Mandatory shrinks on the cluster with the most room; False if none can fit ``spec``."""
        best, best_room = "", -1
        for name, cluster in clusters.items():
            coming = sum(j.releasing for j in cluster.running.values())
            shrinkable = sum(j.size - j.releasing - j.spec.min_size
                             for j in cluster.malleable_jobs() if j.managed)
            room = cycle.avail[name] + coming + max(0, shrinkable)
            if room >= spec.min_size and room > best_room:
                best, best_room = name, room
        if not best:
            return False
        cluster = clusters[best]
        coming = sum(j.releasing for j in cluster.running.values())
        missing = spec.min_size - cycle.avail[best] - coming
        if missing > 0:
            jobs = [j for j in cluster.malleable_jobs() if j.size - j.releasing > j.spec.min_size]
            yield from cycle.relay(self.malleability.shrink(jobs, missing, True))
        return True


class _Growable:
    """The manager's running malleable jobs of a cluster that could still grow (size
    plus growing below their maximum), oldest first, kept per cluster for as long as the
    same view object comes back.

    A view never changes (:class:`~malleable.model.ClusterView` keeps its
    ``malleable_jobs`` on the same ground), and a simulated cluster hands out the same
    view until one of its jobs changes, so most cycles find the list made. Sizes are the
    views' (``size + growing``): ``_grow_all`` asks before any grow of the cluster's jobs
    in the cycle, and the only other answers it can follow are other clusters' grows
    (PRA) or none (PWA grows only when ``_make_room`` yielded nothing), so
    :meth:`_Cycle.size` would add nothing. It holds one view a cluster (the last).
    """

    __slots__ = ("_kept", "cap")

    def __init__(self) -> None:
        self._kept: dict[str, tuple[ClusterView, tuple[RunningJob, ...]]] = {}
        self.cap = 0.0  # KoalaPolicy.grow_cap

    def of(self, name: str, cluster: ClusterView) -> tuple[RunningJob, ...]:
        """The jobs of ``cluster`` (named ``name`` in the view) that could still grow."""
        kept = self._kept.get(name)
        if kept is not None and kept[0] is cluster:
            return kept[1]
        # ClusterView.malleable_jobs, filtered before it is sorted (the same order: the
        # sort is by (start time, id), and ids are unique); most lists have 0 or 1 job
        cap = self.cap
        jobs = [j for j in cluster.running.values()
                if j.managed and j.spec.malleable and j.size + j.growing < (
                    ceiling(j.spec, cap) if cap else j.spec.max_size)]
        if len(jobs) > 1:
            jobs.sort(key=_started)
        kept = self._kept[name] = (cluster, tuple(jobs))
        return kept[1]


def _started(job: RunningJob) -> tuple[float, str]:
    """The order of :meth:`~malleable.model.ClusterView.malleable_jobs`: oldest first,
    ties by id."""
    return job.start_time, job.id


class _Cycle:
    """What the policy knows within one decision: nodes left and sizes after answers.

    A plain class with slots (one is made every cycle: a dataclass with a default factory
    costs more to make)."""

    __slots__ = ("avail", "cap", "delta", "limit", "managed")

    def __init__(self, avail: dict[str, int]) -> None:
        self.avail = avail
        self.delta: dict[str, int] = {}
        self.limit: int | None = None  # the growth threshold in nodes (None: no threshold)
        self.managed = 0  # nodes the managed jobs hold (kept only under a threshold)
        self.cap = 0.0  # KoalaPolicy.grow_cap

    def size(self, job: RunningJob) -> int:
        return job.size + job.growing + self.delta.get(job.id, 0)

    def grow_budget(self, cluster: str) -> int:
        """What may be offered on ``cluster``: its free nodes, capped by the threshold."""
        if self.limit is None:
            return self.avail[cluster]
        return min(self.avail[cluster], self.limit - self.managed)

    def relay(self, negotiation: Negotiation) -> Negotiation:
        """Pass a malleability policy's offers on, noting the answers (:func:`relay`'s
        generator itself: no generator around it to pass each offer through)."""
        return relay(negotiation, self._note)

    def _note(self, action: Grow | Shrink, nodes: int) -> None:
        change = nodes if isinstance(action, Grow) else -nodes
        self.delta[action.job_id] = self.delta.get(action.job_id, 0) + change
        self.managed += change

    def can_still_grow(self, cluster: str, jobs: tuple[RunningJob, ...]) -> bool:
        """Would one of ``jobs``, the cluster's growable jobs (:class:`_Growable`), take
        some of the nodes still available there?

        Under PRA, its only caller, a decision never shrinks, so a job left out of
        ``jobs`` (at its maximum in the view) is still there and would take nothing."""
        available = self.avail[cluster]
        if available <= 0:
            return False
        return any(_accepts(j.spec, self.size(j), available, self.cap) > 0 for j in jobs)


def ceiling(spec: JobSpec, cap: float) -> int:
    """The largest size a job may grow to under a growth cap (0: its maximum)."""
    if not cap:
        return spec.max_size
    return min(spec.max_size, max(spec.initial_size, int(cap * spec.initial_size)))


def _accepts(spec: JobSpec, size: int, offer: int, cap: float) -> int:
    """What ``spec`` at ``size`` takes of ``offer`` extra nodes, under a growth cap."""
    if not cap:
        return spec.accepts(size, offer)
    return spec.accepts(size, max(0, min(offer, ceiling(spec, cap) - size)))


def _capped(grow: Negotiation, ceilings: Mapping[str, int], sizes: Mapping[str, int]
            ) -> Negotiation:
    """``grow``'s offers cut to each job's ceiling (an offer cut to nothing is answered 0
    without being made)."""
    room = {job: ceilings[job] - sizes[job] for job in ceilings}
    answer: int | None = None
    while True:
        try:
            action = grow.send(answer)
        except StopIteration as done:
            return int(done.value or 0)
        if isinstance(action, Grow):
            offer = min(action.offer, room.get(action.job_id, action.offer))
            if offer <= 0:
                answer = 0
                continue
            if offer != action.offer:
                action = Grow(action.job_id, offer)
            answer = yield action
            room[action.job_id] = room.get(action.job_id, offer) - answered(answer)
        else:
            answer = yield action

