"""Where the load CooRM does not manage comes from (the background of every CAP).

A :class:`CapSource` says which hosts of each cluster are taken, from now until
when, by jobs the CooRM RMS did not start. The simulator uses
:class:`NoBackground` (CooRM owns the whole platform, as in the paper).
:class:`ResourceManagerSource` reads real clusters through the core's
:class:`~malleable.resources.ResourceManager` protocol: running jobs hold
their nodes until ``start_time + walltime`` (forever when they have no wall
time), and nodes that are neither idle nor held by a listed job count as taken
until further notice.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Protocol, runtime_checkable

from malleable.coorm.policy import Busy
from malleable.coorm.protocol import ClusterInfo
from malleable.model import ClusterView
from malleable.resources import ResourceManager

#: A job past its time limit is expected to be gone within this many seconds.
OVERRUN_GRACE = 60.0


@runtime_checkable
class CapSource(Protocol):
    """Occupancy that CooRM must plan around."""

    def busy(self, now: float) -> Sequence[Busy]:
        """Hosts taken now by others, per cluster, and until when (inf: unknown)."""
        ...


class NoBackground:
    """CooRM manages every host: no background load."""

    def busy(self, now: float) -> Sequence[Busy]:
        return ()


class ResourceManagerSource:
    """Background load from real clusters observed through ResourceManager adapters.

    ``managed`` names jobs that CooRM itself started on those clusters (they are
    already in its books and must not count twice).
    """

    def __init__(self, managers: Mapping[str, ResourceManager]) -> None:
        self.managers = dict(managers)
        self.managed: set[str] = set()

    def clusters(self) -> tuple[ClusterInfo, ...]:
        """CINFOs from one observation of each cluster."""
        out = []
        for cid, rm in self.managers.items():
            view = rm.observe()
            out.append(ClusterInfo(cid=cid, hosts=view.nodes - view.reserve, speed=view.speed))
        return tuple(out)

    def busy(self, now: float) -> Sequence[Busy]:
        out: list[Busy] = []
        for cid, rm in self.managers.items():
            out.extend(busy_from_view(cid, rm.observe(), now, self.managed))
        return out


def busy_from_view(cid: str, view: ClusterView, now: float,
                   managed: set[str] | frozenset[str] = frozenset()) -> list[Busy]:
    """The background occupancy of one observed cluster (pure; see the module docstring)."""
    out: list[Busy] = []
    listed = 0
    for job in view.running.values():
        if job.id in managed:
            continue
        walltime = job.spec.walltime
        end = job.start_time + walltime if walltime is not None else math.inf
        out.append(Busy(cid, job.size, end if end > now else now + OVERRUN_GRACE))
        listed += job.size
    managed_size = sum(j.size for j in view.running.values() if j.id in managed)
    unexplained = view.nodes - view.reserve - view.available - listed - managed_size
    if unexplained > 0:  # drained, down, or jobs the adapter does not list
        out.append(Busy(cid, unexplained, math.inf))
    return out
