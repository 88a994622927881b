"""CooRM's real views of an OAR site: availability from ``oarstat`` (pure parts).

A job that holds nodes (``Launching`` to ``Finishing``) and that CooRM did not submit
is background load: its nodes are taken from its ``startTime`` until ``startTime`` +
its wall time (OAR kills a job at its wall time, so this is its latest end, as Slurm's
``EndTime`` is). ``oarstat -J`` lists no ``walltime`` field; the parser reads it from
the job's ``message`` (``R=2,W=0:5:0,J=B``), see :mod:`malleable.adapters.oar.parse`.
A job with no wall time holds its nodes until further notice; one past its wall time
is expected gone within :data:`~malleable.coorm.sources.OVERRUN_GRACE`. Waiting jobs
are not counted (CooRM plans ahead of OAR's queue, as it does of Slurm's). Nodes not
``Alive`` are out of service (not among the cluster's hosts).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from malleable.adapters.oar.ctl import Poll
from malleable.adapters.oar.payload import OarPayload, hms
from malleable.coorm.policy import Busy
from malleable.coorm.sources import OVERRUN_GRACE
from malleable.model import JobSpec


def busy_from_oar_poll(cid: str, poll: Poll, now: float, offset: float, *,
                       managed: frozenset[int] | set[int] = frozenset()) -> list[Busy]:
    """Background occupancy of one polled OAR site, in service time ``now`` (pure).

    ``offset`` is wall-clock time minus service time (as for Slurm:
    :func:`malleable.coorm.real.busy_from_poll`); ``managed`` are the OAR ids of the
    jobs CooRM itself submitted (left out: the core counts them). Unlike on Slurm, no
    node is busy without a listed job: OAR lists the nodes of every job it runs.
    """
    usable = {n.address for n in poll.nodes if n.usable}
    out: list[Busy] = []
    for job in poll.jobs:
        nodes = set(job.nodes) & usable
        if job.holds_nodes and nodes and job.job_id not in managed:
            out.append(Busy(cid, len(nodes), _end(job.start_time, job.walltime, now, offset)))
    return out


def _end(start: float | None, walltime: float | None, now: float, offset: float) -> float:
    """A job's latest end in service time (its start now if OAR has no start yet)."""
    if walltime is None:
        return math.inf
    end = now + walltime if start is None else start + walltime - offset
    return end if end > now else now + OVERRUN_GRACE


@dataclass(frozen=True, slots=True)
class OarWalltimePayload(OarPayload):
    """The OAR payload with the job's wall time the requested duration, in whole minutes."""

    def walltime(self, spec: JobSpec) -> str:
        if spec.walltime is None:
            return OarPayload.walltime(self, spec)
        return hms(60 * max(1, math.ceil(spec.walltime / 60.0 - 1e-9)))
