"""AC-DS (and AG-DS, EQUI-EQUI) on real sites: a :class:`~malleable.policies.base.Policy`.

Once per level-2 quantum (``quantum`` seconds of the manager's clock, the ``now`` it
passes) the policy rebuilds the tree from the view (grid -> site -> groupings ->
jobs, :mod:`~malleable.policies.hierarchical.sitetree`), estimates each job's desire,
and reallocates whole processors with integral DEQ from the highest level whose
quantum has ended. It then yields mandatory :class:`~malleable.model.Shrink` for jobs
above their target, :class:`~malleable.model.Grow` for jobs below it (from what is
idle now: released processors are waited for), and :class:`~malleable.model.Place`
for waiting jobs that got processors. Between quanta it only retries placements.

Desires, per job, from what the application reports in ``RunningJob.feedback``:

* ``parallelism`` (its average parallelism over its last quantum): **A-Control**,
  the desire is that number;
* else ``utilization`` or ``efficiency`` (the fraction of its processors' time it
  used): **A-Greedy** from the policy's last desire for the job (its current size
  the first time);
* else, no feedback: the desire is the job's **maximum size**, so DEQ falls back to
  equipartitioning each node's processors among its children, capped by what the
  jobs can take (EQUI-EQUI with caps). A job that cannot tell us what it needs gets
  a fair share, and no processor that some job could use is left idle.

Every desire is kept within the job's ``[min_size, max_size]``; a job about to start
desires its minimum (A-Control's initial desire of one processor, at least the
minimum). A target below a job's minimum is raised to the minimum.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from malleable.model import Defer, Grow, Place, Reject, RunningJob, Shrink, View
from malleable.policies.base import Steps, answered, infeasible, largest_offer
from malleable.policies.hierarchical.config import TreeConfig
from malleable.policies.hierarchical.estimators import INITIAL_DESIRE, a_greedy
from malleable.policies.hierarchical.scheduler import JobsInput, TreeScheduler
from malleable.policies.hierarchical.sitetree import Member, Path, build, capacity, site_of

logger = logging.getLogger(__name__)


def feedback_desire(job: RunningJob, previous: float | None, config: TreeConfig) -> float:
    """The job's next desire from its feedback (see the module docstring), unclamped."""
    fb = job.feedback
    if "parallelism" in fb:
        return float(fb["parallelism"])
    used = fb.get("utilization", fb.get("efficiency"))
    if used is not None:
        size = float(job.size - job.releasing)
        last = float(previous) if previous is not None else size
        nxt = a_greedy(np.array([last]), np.array([size]), np.array([used * size]),
                       np.array([1.0]), config.greedy)
        return float(nxt[0])
    return float(job.spec.max_size)


@dataclass(frozen=True)
class Plan:
    """Targets decided at a quantum: running jobs' sizes and waiting jobs' starts."""

    running: dict[str, int]
    starting: dict[str, tuple[str, int]]
    rejected: dict[str, str]


@dataclass
class HierarchicalPolicy:
    """AC-DS over grid -> site -> groups, in whole processors (see the module docstring)."""

    config: TreeConfig = field(default_factory=TreeConfig)
    name: str = "acds"
    _quantum: int | None = None
    _alloc: dict[int, dict[Path, float]] = field(default_factory=dict)
    _desires: dict[str, float] = field(default_factory=dict)
    _starting: dict[str, tuple[str, int]] = field(default_factory=dict)

    @classmethod
    def from_options(cls, options: Mapping[str, Any]) -> HierarchicalPolicy:
        return cls(TreeConfig.from_mapping(options))

    # ---------------------------------------------------------------- durable state

    def export_state(self) -> dict[str, object]:
        """The policy's memory (quantum, desire estimates, allocations, starts planned),
        as JSON-able data the manager journals so that a restart does not forget it."""
        return {"quantum": self._quantum,
                "desires": dict(self._desires),
                "alloc": [[level, [[list(path), value] for path, value in paths.items()]]
                          for level, paths in self._alloc.items()],
                "starting": {job: [site, size] for job, (site, size) in self._starting.items()}}

    def import_state(self, state: Mapping[str, Any]) -> None:
        """Take up :meth:`export_state`'s output (ValueError if it is malformed)."""
        try:
            quantum = state.get("quantum")
            self._quantum = None if quantum is None else int(quantum)
            self._desires = {str(k): float(v) for k, v in state.get("desires", {}).items()}
            self._alloc = {int(level): {tuple(str(p) for p in path): float(value)
                                        for path, value in paths}
                           for level, paths in state.get("alloc", [])}
            self._starting = {str(job): (str(site), int(size))
                              for job, (site, size) in state.get("starting", {}).items()}
        except (TypeError, ValueError, AttributeError) as exc:
            raise ValueError(f"AC-DS state cannot be taken up: {exc}") from None

    def decide(self, view: View, now: float) -> Steps:
        index = math.floor(now / self.config.quantum + 1e-9)
        if self._quantum is not None and index <= self._quantum:
            yield from self._place(view, self._starting)
            return
        top = (self.config.depth if self._quantum is None
               else self.config.quanta.top_between(self._quantum, index))
        self._quantum = index
        plan = self.plan(view, top)
        for job_id, reason in plan.rejected.items():
            yield Reject(job_id, reason)
        yield from self._resize(view, plan.running)
        self._starting = dict(plan.starting)
        yield from self._place(view, self._starting)

    # ---------------------------------------------------------------- planning

    def plan(self, view: View, top: int) -> Plan:
        """Reallocate from level ``top``: the target of every job taking part."""
        members, rejected = self._members(view)
        if not members:
            return Plan({}, {}, rejected)
        tree = build(members, self.config.levels)
        depth = self.config.depth
        sites = site_of(view)
        caps = {depth - 1: np.array([float(capacity(sites[p[0]])) for p in tree.paths[depth - 1]])}
        scheduler = TreeScheduler(tree.layout, self.config.quanta, float(caps[depth - 1].sum()),
                                  self.config.rule, integral=True, caps=caps)
        for level, paths in tree.paths.items():  # what the levels above ``top`` still hold
            known = self._alloc.get(level, {})
            scheduler.alloc[level] = np.array([known.get(p, 0.0) for p in paths])
        jobs = JobsInput(tree.leaf, np.array([m.desire for m in members]),
                         np.ones(len(members), dtype=bool),
                         np.array([float(m.size) for m in members]),
                         np.array([float(m.spec.max_size) for m in members]))
        result = scheduler.reallocate(top, jobs)
        self._alloc = {level: dict(zip(paths, result.nodes[level].tolist(), strict=True))
                       for level, paths in tree.paths.items()}
        return self._targets(members, result.jobs, rejected)

    def _members(self, view: View) -> tuple[list[Member], dict[str, str]]:
        members: list[Member] = []
        for cluster in site_of(view).values():
            for job in cluster.malleable_jobs():
                desire = feedback_desire(job, self._desires.get(job.id), self.config)
                self._desires[job.id] = desire
                members.append(Member(job.spec, cluster.name, job.size - job.releasing,
                                      _clamp(desire, job), job.start_time))
        present = {m.spec.id for m in members}
        self._desires = {k: v for k, v in self._desires.items() if k in present}
        starting, rejected = self._assign(view, members)
        return members + starting, rejected

    def _assign(self, view: View, members: list[Member]) -> tuple[list[Member], dict[str, str]]:
        """Give each waiting job a site: where an equal share would be largest.

        A site qualifies if its capacity above the minima of its jobs fits the job's
        minimum; among those, the largest ``capacity / (jobs + 1)`` wins (ties by name).
        """
        sites = site_of(view)
        cap = {name: capacity(c) for name, c in sites.items()}
        count = {name: sum(1 for m in members if m.cluster == name) for name in sites}
        room = {name: cap[name] - sum(m.spec.min_size for m in members if m.cluster == name)
                for name in sites}
        largest = largest_offer(view)
        starting: list[Member] = []
        rejected: dict[str, str] = {}
        for waiting in view.waiting:
            spec = waiting.spec
            reject = infeasible(spec.id, spec.min_size, largest)
            if reject is not None:
                # ACDS has always recorded "nodes; the largest" (the others "nodes, the"):
                # kept, so that its records stay bit-for-bit what they were.
                rejected[spec.id] = reject.reason.replace(", the largest", "; the largest")
                continue
            fits = [n for n in sites if room[n] >= spec.min_size]
            if not fits:
                continue  # no room this quantum; it stays in the queue
            name = max(fits, key=lambda n: (cap[n] / (count[n] + 1), n))
            room[name] -= spec.min_size
            count[name] += 1
            starting.append(Member(spec, name, 0, max(INITIAL_DESIRE, float(spec.min_size))))
        return starting, rejected

    @staticmethod
    def _targets(members: list[Member], alloc: np.ndarray, rejected: dict[str, str]) -> Plan:
        running: dict[str, int] = {}
        starting: dict[str, tuple[str, int]] = {}
        for m, a in zip(members, alloc.tolist(), strict=True):
            target = int(a)
            if m.size > 0:
                running[m.spec.id] = max(m.spec.min_size, min(m.spec.max_size, target))
            elif target >= m.spec.min_size:
                starting[m.spec.id] = (m.cluster, min(m.spec.max_size, target))
        return Plan(running, starting, rejected)

    # ---------------------------------------------------------------- actions

    def _resize(self, view: View, targets: dict[str, int]) -> Steps:
        jobs = [j for c in site_of(view).values() for j in c.malleable_jobs() if j.id in targets]
        for job in jobs:
            excess = job.size - job.releasing - targets[job.id]
            if excess > 0:
                yield Shrink(job.id, excess, mandatory=True)
        pool = {name: c.available for name, c in view.clusters.items()}
        for job in jobs:
            missing = targets[job.id] - (job.size - job.releasing)
            offer = min(missing, pool[job.cluster])
            if offer > 0:
                accepted = answered((yield Grow(job.id, offer)))
                pool[job.cluster] -= accepted

    def _place(self, view: View, starting: dict[str, tuple[str, int]]) -> Steps:
        pool = {name: c.available for name, c in view.clusters.items()}
        for waiting in view.waiting:
            target = starting.get(waiting.id)
            if target is None:
                continue
            cluster, size = target
            size = min(size, pool.get(cluster, 0))
            if size < waiting.spec.min_size:
                yield Defer(waiting.id)
                continue
            granted = answered((yield Place(waiting.id, cluster, size)))
            pool[cluster] -= granted
            if granted:
                del starting[waiting.id]


def _clamp(desire: float, job: RunningJob) -> float:
    return min(float(job.spec.max_size), max(float(job.spec.min_size), desire))
