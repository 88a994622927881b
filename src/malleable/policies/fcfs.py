"""Strict first-come-first-served with first-fit allocation (no backfilling).

The head of the placement queue starts as soon as some cluster has room for it:
the first cluster, in the view's order, whose available nodes cover the job's
start size (first fit). Nothing passes a head that does not fit: the scan stops
there and the head counts a try. A job larger than every cluster can ever offer is
rejected, so that it does not block the queue for ever.

Sizes: a rigid job starts at its size; a moldable or malleable job starts at its
initial size (FCFS never resizes anything: it is the classic rigid scheduler, used
to check our simulator against AccaSim's FIFO + first-fit, job by job).

With the simulator's event order (ends, then releases, then arrivals, then one
policy run per time), this gives the same schedule as AccaSim's
``FirstInFirstOut(FirstFit())`` on a one-cluster trace.
"""

from __future__ import annotations

from dataclasses import dataclass

from malleable.compiling import mypyc_attr
from malleable.model import Defer, Place, View
from malleable.policies.base import Steps, infeasible, largest_offer


@mypyc_attr(native_class=False)  # picklable when compiled (setup.py)
@dataclass(frozen=True)
class FCFS:
    """Strict FCFS, first fit: the queue head starts as soon as it fits, nothing passes it."""

    name: str = "fcfs"

    def decide(self, view: View, now: float) -> Steps:
        free = []
        for name, c in view.clusters.items():  # a loop, not a comprehension: no frame a cycle
            free.append((name, c.available))
        for waiting in view.waiting:
            spec = waiting.spec
            size = spec.initial_size
            slot = _first_fit(free, size)
            if slot < 0:
                largest = largest_offer(view)
                if size > largest:  # never fits (the Reject of policies.base.infeasible)
                    reject = infeasible(spec.id, size, largest)
                    if reject is not None:
                        yield reject
                    continue
                yield Defer(spec.id)
                return
            name, avail = free[slot]
            granted = (yield Place(spec.id, name, size)) or 0
            if not granted:  # the cluster refused: the head stays at the head
                yield Defer(spec.id)
                return
            free[slot] = (name, avail - granted)


def _first_fit(free: list[tuple[str, int]], size: int) -> int:
    """Index of the first cluster with ``size`` nodes free, -1 when none has."""
    for i, (_, avail) in enumerate(free):
        if avail >= size:
            return i
    return -1
