"""A small discrete-event engine on a binary heap.

Events at the same time run in priority order (lower first), then in the order
they were scheduled. After all the events of one time have run, the engine calls
``on_step(time)`` once: that is where the manager's cycle runs in simulation, as a
poll would on a real system.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from heapq import heappop, heappush  # bound at import: compiled, no lookup on the module

#: Priorities: ends free their nodes before arrivals are queued (as AccaSim does).
END, RELEASE, ARRIVAL, TIMER = 0, 1, 2, 3


class Engine:
    """Simulated time and a queue of callbacks."""

    __slots__ = ("_heap", "_seq", "now")

    def __init__(self, start: float = 0.0) -> None:
        self.now = start
        self._heap: list[tuple[float, int, int, Callable[[], None]]] = []
        self._seq = 0  # the next tie-breaker: events of one time and priority in order

    def at(self, time: float, callback: Callable[[], None], priority: int = TIMER) -> None:
        """Run ``callback`` at ``time`` (never in the past)."""
        if time < self.now:
            raise ValueError(f"cannot schedule at {time}, the clock is at {self.now}")
        seq = self._seq  # an int, not itertools.count(): compiled, no call per event
        self._seq = seq + 1
        heappush(self._heap, (time, priority, seq, callback))

    def __len__(self) -> int:
        return len(self._heap)

    def run(self, on_step: Callable[[float], bool] | None = None, until: float = math.inf) -> float:
        """Run events until none are left, ``until`` is passed, or ``on_step`` returns False."""
        heap = self._heap
        pop = heappop
        while heap:
            time = heap[0][0]
            if time > until:
                break
            self.now = time
            while heap and heap[0][0] == time:
                pop(heap)[3]()
            if on_step is not None and not on_step(time):
                break
        return self.now
