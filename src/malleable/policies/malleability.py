"""KOALA's malleability management policies (section V-C), applied to one cluster.

Each policy turns "grow these jobs by up to ``value`` nodes" or "reclaim ``value``
nodes from these jobs" into offers. The offers are negotiated: every ``yield``
sends a :class:`~malleable.model.Grow` or :class:`~malleable.model.Shrink` to the
job and receives the number of nodes it accepted. The generator's return value
is the total accepted.

* FPSMA (Fig. 4) favours previously started jobs: grows from the oldest, shrinks
  from the youngest, offering the whole remaining value to one job at a time.
* EGS (Fig. 5) splits the value equally; the remainder goes as a bonus of one to
  the least recently started jobs on grow, and is taken as a malus of one from the
  most recently started jobs on shrink.
* Equipartition levels the sizes: a grow raises the smallest jobs toward a common
  size, a shrink lowers the largest ones (classic equipartition of the whole set,
  restricted to one direction per call so that PRA never shrinks).
"""

from __future__ import annotations

from collections.abc import Generator, Sequence
from typing import ClassVar, Protocol

from malleable.compiling import mypyc_attr
from malleable.model import Grow, RunningJob, Shrink
from malleable.policies.base import answered

Negotiation = Generator[Grow | Shrink, int | None, int]
"""A :data:`~malleable.policies.base.Negotiating` ``[int]`` that yields only grows and
shrinks and returns the nodes they moved."""


class MalleabilityPolicy(Protocol):
    """Grow or shrink the malleable jobs of one cluster (oldest first in ``jobs``)."""

    name: ClassVar[str]

    def grow(self, jobs: Sequence[RunningJob], value: int) -> Negotiation: ...

    def shrink(self, jobs: Sequence[RunningJob], value: int, mandatory: bool) -> Negotiation: ...


@mypyc_attr(allow_interpreted_subclasses=True)  # a policy to build on (setup.py)
class FPSMA:
    """Favour Previously Started Malleable Applications (KOALA Fig. 4)."""

    name: ClassVar[str] = "fpsma"

    def grow(self, jobs: Sequence[RunningJob], value: int) -> Negotiation:
        total = 0
        for job in jobs:  # increasing start time
            if value <= 0:
                break
            accepted = answered((yield Grow(job.id, value)))
            value -= accepted
            total += accepted
        return total

    def shrink(self, jobs: Sequence[RunningJob], value: int, mandatory: bool) -> Negotiation:
        total = 0
        for job in reversed(jobs):  # decreasing start time
            if value <= 0:
                break
            released = answered((yield Shrink(job.id, value, mandatory)))
            value -= released
            total += released
        return total


@mypyc_attr(allow_interpreted_subclasses=True)  # a policy to build on (setup.py)
class EGS:
    """Equi-Grow & Shrink (KOALA Fig. 5).

    Fig. 5's EQUI_SHRINK has two typos: line 5 compares with ``growRemainder`` and
    line 6 sends ``shrinkValue + malus``. We implement the evident intent, as the
    text says: each job is asked for its share ``value // n`` plus a malus of one
    for the ``value % n`` most recently started jobs.
    """

    name: ClassVar[str] = "egs"

    def grow(self, jobs: Sequence[RunningJob], value: int) -> Negotiation:
        total = 0
        if not jobs or value <= 0:
            return total
        share, remainder = divmod(value, len(jobs))
        for i, job in enumerate(jobs):  # increasing start time: bonus to the oldest
            offer = share + (1 if i < remainder else 0)
            if offer > 0:
                total += answered((yield Grow(job.id, offer)))
        return total

    def shrink(self, jobs: Sequence[RunningJob], value: int, mandatory: bool) -> Negotiation:
        total = 0
        if not jobs or value <= 0:
            return total
        share, remainder = divmod(value, len(jobs))
        for i, job in enumerate(reversed(jobs)):  # decreasing start time: malus to the youngest
            asked = share + (1 if i < remainder else 0)
            if asked > 0:
                total += answered((yield Shrink(job.id, asked, mandatory)))
        return total


def level_up(sizes: Sequence[int], maxima: Sequence[int], value: int) -> list[int]:
    """Targets after pouring ``value`` units onto the smallest sizes first (water filling).

    Oldest jobs (lowest index) win ties, as KOALA's bonus does.
    """
    targets = list(sizes)
    for _ in range(value):
        candidates = [i for i, t in enumerate(targets) if t < maxima[i]]
        if not candidates:
            break
        i = min(candidates, key=lambda k: (targets[k], k))
        targets[i] += 1
    return targets


def level_down(sizes: Sequence[int], minima: Sequence[int], value: int) -> list[int]:
    """Targets after taking ``value`` units from the largest sizes first.

    The youngest jobs (highest index) lose ties, as KOALA's malus does.
    """
    targets = list(sizes)
    for _ in range(value):
        candidates = [i for i, t in enumerate(targets) if t > minima[i]]
        if not candidates:
            break
        i = max(candidates, key=lambda k: (targets[k], k))
        targets[i] -= 1
    return targets


@mypyc_attr(allow_interpreted_subclasses=True)  # a policy to build on (setup.py)
class Equipartition:
    """Classic equipartition: bring the malleable jobs of a cluster to equal sizes."""

    name: ClassVar[str] = "equipartition"

    def grow(self, jobs: Sequence[RunningJob], value: int) -> Negotiation:
        sizes = [j.size for j in jobs]
        targets = level_up(sizes, [j.spec.max_size for j in jobs], value)
        total = 0
        for job, size, target in zip(jobs, sizes, targets, strict=True):
            if target > size:
                total += answered((yield Grow(job.id, target - size)))
        return total

    def shrink(self, jobs: Sequence[RunningJob], value: int, mandatory: bool) -> Negotiation:
        sizes = [j.size for j in jobs]
        targets = level_down(sizes, [j.spec.min_size for j in jobs], value)
        total = 0
        for job, size, target in reversed(list(zip(jobs, sizes, targets, strict=True))):
            if target < size:
                total += answered((yield Shrink(job.id, size - target, mandatory)))
        return total


MALLEABILITY_POLICIES: dict[str, type[FPSMA] | type[EGS] | type[Equipartition]] = {
    cls.name: cls for cls in (FPSMA, EGS, Equipartition)
}
