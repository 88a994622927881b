"""Application-initiated grow requests, honoured as voluntary grows (pure).

An application may ask for more processors at a point of its choosing; the runner
shows the request to policies as the job's ``feedback["requested"]`` (the total
size it asks for). KOALA (sections II-C and II-D, and the end of section VII)
classes such a request as *voluntary*: the scheduler may grant it from free
processors, it is under no obligation to, and it does not shrink other jobs to
make room.

:class:`HonourRequests` wraps any policy. It runs the inner policy first,
forwarding every answer to it exactly as the manager would (so the inner policy
sees the same negotiation as without the wrapper), and follows the answers to
know which nodes are still free on each cluster:

* a granted :class:`~malleable.model.Place` or an accepted
  :class:`~malleable.model.Grow` takes nodes;
* a :class:`~malleable.model.Shrink` gives nothing now (nodes are released later,
  after the application has left them).

Then it grants requests, oldest job first (start time, then id), from what is
left on the job's cluster:

* **waiting jobs first**: the free nodes a waiting job could start on are not
  given away. In queue order, each job still waiting (not placed, rejected or
  cancelled in this decision) whose minimum size fits the spare nodes of some
  cluster keeps that many nodes on the cluster with the most spare nodes;
* a job already growing or releasing, or one the inner policy resized in this
  decision, is left for a later cycle;
* the grow offered is ``min(requested - size, max_size - size, spare)``, rounded
  down to a size the application accepts (its :class:`~malleable.model.SizeRule`);
  nothing is offered when that rounds to no change.

The wrapper keeps the inner policy's name (records and logs name the policy the
user chose). :func:`honour_requests` wraps a policy once (a wrapped policy is
returned unchanged). The manager applies it to whatever policy it runs whenever
one of its clusters reports the applications' feedback (``Capability.FEEDBACK``,
where requests come from), simulated or real. A cycle in which no job on a
cluster with free nodes has asked returns the inner decision itself, untouched.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from itertools import chain
from operator import attrgetter, methodcaller

from malleable.model import (
    Action,
    Cancel,
    Grow,
    Place,
    Reject,
    RunningJob,
    Shrink,
    View,
)
from malleable.policies.base import Decision, Policy, Steps, answered, negotiate, relay

#: The feedback key under which a runner shows a job's requested total size.
REQUESTED = "requested"

_feedback = attrgetter("feedback")
_running = attrgetter("running")


def requested_size(job: RunningJob) -> int | None:
    """The total size the job's application asked for, or None when it asked for nothing."""
    value = job.feedback.get(REQUESTED)
    if value is None:
        return None
    return int(value)


def grant(job: RunningJob, spare: int) -> int:
    """How many nodes to offer ``job`` for its request, with ``spare`` free nodes (0: none)."""
    asked = requested_size(job)
    if asked is None or spare <= 0 or not job.can_grow:
        return 0
    limit = min(asked, job.spec.max_size, job.size + spare)
    target = job.spec.size_rule.largest_fit(limit)
    return max(0, target - job.size)


@dataclass
class _Ledger:
    """What the inner policy's decision did: nodes taken, jobs placed or resized."""

    view: View
    free: dict[str, int]
    gone: set[str]
    resized: set[str]

    @classmethod
    def of(cls, view: View) -> _Ledger:
        return cls(view, {name: c.available for name, c in view.clusters.items()}, set(), set())

    def note(self, action: Action, taken: int) -> None:
        if isinstance(action, Place):
            if taken > 0:
                self.gone.add(action.job_id)
                self.free[action.cluster] = self.free.get(action.cluster, 0) - taken
        elif isinstance(action, Grow):
            self.resized.add(action.job_id)
            job = self.view.job(action.job_id)
            if job is not None:
                self.free[job.cluster] = self.free.get(job.cluster, 0) - taken
        elif isinstance(action, Shrink):
            self.resized.add(action.job_id)
        elif isinstance(action, (Reject, Cancel)):
            self.gone.add(action.job_id)


@dataclass(frozen=True)
class HonourRequests:
    """Run ``inner``, then grant the applications' grow requests from the nodes left free."""

    inner: Policy

    @property
    def name(self) -> str:
        return self.inner.name

    def decide(self, view: View, now: float) -> Decision:
        askers = _askers(view)
        decision = self.inner.decide(view, now)
        if not askers:  # nothing to grant this cycle: the inner decision itself, no overhead
            return decision
        return _grant(view, decision, askers)


def _grant(view: View, decision: Decision, askers: list[RunningJob]) -> Steps:
    """The inner decision (answers forwarded), then a Grow for each request that fits."""
    ledger = _Ledger.of(view)
    yield from _relay(decision, ledger)
    spare = _spare_after_waiting(view, ledger)
    for job in askers:
        if job.id in ledger.resized:
            continue
        offer = grant(job, spare.get(job.cluster, 0))
        if offer > 0:
            accepted = answered((yield Grow(job.id, offer)))
            spare[job.cluster] -= accepted


def _relay(decision: Iterable[Action], ledger: _Ledger) -> Steps:
    """Yield the inner decision's actions, sending each answer back (the manager protocol)."""
    yield from relay(negotiate(decision), ledger.note)


def _askers(view: View) -> list[RunningJob]:
    """Running jobs with an open grow request, oldest first, on clusters with free nodes.

    Looked up before the inner policy decides: a cluster without free nodes then has
    none after it either (shrinks release their nodes later).
    """
    clusters = view.clusters.values()
    running = chain.from_iterable(map(methodcaller("values"), map(_running, clusters)))
    if not any(map(_feedback, running)):
        return []  # the common case (no job reports anything), checked at C speed
    found: list[RunningJob] = []
    for cluster in clusters:
        if cluster.available <= 0:
            continue
        for job in cluster.running.values():
            if not job.feedback or job.releasing or job.growing:
                continue
            asked = requested_size(job)
            if asked is not None and asked > job.size and job.can_grow:
                found.append(job)
    found.sort(key=lambda j: (j.start_time, j.id))
    return found


def _spare_after_waiting(view: View, ledger: _Ledger) -> dict[str, int]:
    """Free nodes per cluster once every waiting job that fits has kept its minimum."""
    spare = {name: max(0, free) for name, free in ledger.free.items()}
    for waiting in view.waiting:
        if waiting.id in ledger.gone:
            continue
        need = waiting.spec.min_size
        where = max(spare, key=lambda n: spare[n], default="")
        if where and spare[where] >= need:
            spare[where] -= need
        if not any(spare.values()):
            break
    return spare


def honour_requests(policy: Policy) -> Policy:
    """``policy`` wrapped so that applications' grow requests are honoured (once)."""
    return policy if isinstance(policy, HonourRequests) else HonourRequests(policy)

