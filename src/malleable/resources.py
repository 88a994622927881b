"""The resource-manager interface that the simulator and the real adapters share.

One :class:`ResourceManager` stands for one cluster. The manager observes it once
per cycle, applies the policy's actions through it, and drains the job events it
saw (starts, resizes, ends) to keep its per-job records. An adapter declares what
it can do (:class:`Capability`) rather than pretend.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence
from typing import Protocol, runtime_checkable

from malleable.model import ClusterView, JobSpec
from malleable.model import JobEvent as JobEvent  # defined with the model's values (compiled)


class Capability(enum.Enum):
    """What an adapter can do besides submit, observe and cancel."""

    SHRINK = "shrink"
    """Release nodes of a running job."""
    EXPAND = "expand"
    """Add nodes to a running job."""
    MOLDABLE = "moldable"
    """Submit a job with a range of sizes and let the resource manager choose."""
    FEEDBACK = "feedback"
    """Report per-job feedback from the application (parallelism, efficiency)."""
    MPI = "mpi"
    """Resize ``--mpi`` jobs through their application channel: the site service checks
    each agent's MUNGE credential with ``unmunge`` on the site (docs/site.md). Declared
    absent (``missing``) by a transport that runs no command there (REST); the SSH and
    local transports have it without listing it (no policy asks for it)."""


PENDING = -1
"""What ``offer_grow`` or ``request_shrink`` may answer when the negotiation takes a while:
it goes on in the adapter's worker, and its result comes later as a :class:`JobEvent`
with ``answer`` set. Meanwhile the adapter's view shows the job ``growing`` (or
``releasing``) and refuses another negotiation for it. The manager gives the policy, for
a grow, the nodes the job would take (claimed while in flight) and, for a shrink, 0
(nothing free yet); it records the operation when the answer arrives. Simulated
clusters never answer PENDING."""


@runtime_checkable
class ResourceManager(Protocol):
    """One cluster, simulated or real."""

    name: str
    capabilities: frozenset[Capability]

    def observe(self) -> ClusterView:
        """The cluster now: nodes, idle, running jobs (managed or not), reserve."""
        ...

    def start(self, spec: JobSpec, size: int) -> int:
        """Start (submit) ``spec`` with ``size`` nodes; the size granted, 0 if refused."""
        ...

    def offer_grow(self, job_id: str, offer: int) -> int:
        """Offer ``offer`` more nodes to a running job; allocate what it accepts; return
        that, or :data:`PENDING` (the answer comes later as an event)."""
        ...

    def request_shrink(self, job_id: str, amount: int, mandatory: bool) -> int:
        """Ask a running job to release ``amount`` nodes; return how many it will release,
        or :data:`PENDING` (the answer comes later as an event).

        The nodes count as idle only once released (the adapter's next view shows it).
        """
        ...

    def cancel(self, job_id: str) -> None:
        """End a job this adapter started."""
        ...

    def drain_events(self) -> Sequence[JobEvent]:
        """Job events seen since the last call, oldest first."""
        ...

    def close(self) -> None:
        """Release what the adapter holds open (connections); jobs keep running."""
        ...


@runtime_checkable
class Abandoning(ResourceManager, Protocol):
    """A resource manager that can let go of jobs the manager recorded failed (their site
    was given up) and cancel them when the site answers again."""

    def abandon(self, job_ids: Iterable[str]) -> None:
        """Stop following these jobs: no more events of them; whatever of them the site
        still runs is cancelled at its next poll that answers."""
        ...


@runtime_checkable
class Adopting(ResourceManager, Protocol):
    """A resource manager that can take charge again of jobs it ran before a restart."""

    def adopt(self, spec: JobSpec, native_id: int | None, *, requested: int = 0,
              started: bool = False, size: int = 0, since: float | None = None) -> None:
        """Follow ``spec`` again: ``native_id`` is the resource manager's own job id (None
        if it was never learnt), ``requested`` the size asked at start, ``started`` whether
        it was seen running, ``size`` its last known size, ``since`` when it was placed."""
        ...
