"""Cluster availability profiles (CAPs): available hosts as a step function of time.

A :class:`Profile` maps each breakpoint time to the number of hosts available from
that time until the next breakpoint; the last step lasts forever. It is backed by a
``sortedcontainers.SortedDict`` so that inserting an allocation, querying a time
and scanning for the first hole where a request fits stay cheap as it grows.

Times are seconds (floats); host counts are ints. A profile starts at its
``origin`` (the time the view was computed): asking about earlier times answers
for the origin.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

import numpy as np
import numpy.typing as npt
from sortedcontainers import SortedDict

INF = math.inf

#: A serialised CAP: ``((t0, n0), (t1, n1), ...)``; ``n_k`` hosts from ``t_k`` to ``t_{k+1}``.
Steps = tuple[tuple[float, int], ...]


class Profile:
    """Available hosts over time on one cluster (a right-continuous step function)."""

    __slots__ = ("_arrays", "_steps", "capacity")

    def __init__(self, capacity: int, origin: float = 0.0) -> None:
        if capacity < 0:
            raise ValueError(f"capacity {capacity} is negative")
        if not math.isfinite(origin):
            raise ValueError(f"origin {origin} is not finite")
        self.capacity = capacity
        self._steps: SortedDict = SortedDict({origin: capacity})
        self._arrays: tuple[npt.NDArray[np.float64], npt.NDArray[np.int64]] | None = None

    # ------------------------------------------------------------------ building

    @classmethod
    def from_steps(cls, capacity: int, steps: Iterable[tuple[float, int]]) -> Profile:
        """A profile from serialised steps (the first one sets the origin)."""
        items = list(steps)
        if not items:
            raise ValueError("a profile needs at least one step")
        prof = cls(capacity, float(items[0][0]))
        prof._steps.clear()
        last = -INF
        for t, n in items:
            if not t > last:
                raise ValueError(f"step times must increase strictly (got {t} after {last})")
            if not 0 <= n <= capacity:
                raise ValueError(f"step ({t}, {n}) outside [0, {capacity}] hosts")
            prof._steps[float(t)] = int(n)
            last = t
        return prof

    def copy(self) -> Profile:
        dup = Profile(self.capacity, self.origin)
        dup._steps = self._steps.copy()
        return dup

    @property
    def origin(self) -> float:
        return float(self._steps.keys()[0])

    def add(self, start: float, end: float, delta: int) -> None:
        """Change availability by ``delta`` hosts over ``[start, end)`` (``end`` may be inf)."""
        start = max(start, self.origin)
        if not end > start or delta == 0:
            return
        self._arrays = None
        self._split(start)
        if math.isfinite(end):
            self._split(end)
        for t in list(self._steps.irange(start, end, inclusive=(True, False))):
            self._steps[t] += delta
        self._merge(start)
        if math.isfinite(end):
            self._merge(end)

    def reserve(self, start: float, end: float, hosts: int) -> None:
        """Take ``hosts`` over ``[start, end)``; ValueError if they are not all available."""
        if hosts > self.min_available(start, end):
            raise ValueError(f"{hosts} hosts are not available over [{start}, {end})")
        self.add(start, end, -hosts)

    def _split(self, t: float) -> None:
        if t not in self._steps:
            self._steps[t] = self.available(t)

    def _merge(self, t: float) -> None:
        """Drop the breakpoint at ``t`` when it no longer changes the value."""
        idx = self._steps.bisect_left(t)
        if 0 < idx < len(self._steps) and self._steps.keys()[idx] == t:
            values = self._steps.values()
            if values[idx] == values[idx - 1]:
                del self._steps[t]

    # ------------------------------------------------------------------ queries

    def available(self, t: float) -> int:
        """Hosts available at time ``t``."""
        idx = max(0, self._steps.bisect_right(t) - 1)
        return int(self._steps.values()[idx])

    def min_available(self, start: float, end: float) -> int:
        """Fewest hosts available at any time in ``[start, end)``."""
        start = max(start, self.origin)
        lowest = self.available(start)
        if end > start:
            for t in self._steps.irange(start, end, inclusive=(False, False)):
                lowest = min(lowest, self._steps[t])
        return lowest

    def first_fit(self, hosts: int, duration: float, after: float) -> float:
        """Earliest start ``>= after`` with ``hosts`` available for ``duration`` (inf if never)."""
        if hosts <= 0:
            return max(after, self.origin)
        keys, values = self._steps.keys(), self._steps.values()
        size = len(keys)
        cand = max(after, self.origin)
        i = max(0, self._steps.bisect_right(cand) - 1)
        while True:
            while values[i] < hosts:
                i += 1
                if i == size:
                    return INF
                cand = keys[i]
            j = i + 1
            end = cand + duration
            while j < size and keys[j] < end:
                if values[j] < hosts:
                    break
                j += 1
            else:
                return cand
            i = j

    def earliest_starts(self, durations: Sequence[float] | npt.NDArray[np.float64],
                        after: float) -> npt.NDArray[np.float64]:
        """Earliest start for 1, 2, ..., N hosts, host count ``n`` needing ``durations[n-1]``.

        The same answer as :meth:`first_fit` for each count, computed at once with
        numpy (what a moldable scheduler does for every configuration of a job).
        """
        dur = np.asarray(durations, dtype=np.float64)
        times, avail = self._window(after)
        need = np.arange(1, dur.size + 1, dtype=np.int64)
        fits = avail[None, :] >= need[:, None]
        width = times.size
        fail_at = np.where(fits, width, np.arange(width)[None, :])
        next_fail = np.minimum.accumulate(fail_at[:, ::-1], axis=1)[:, ::-1]
        run_end = np.append(times, INF)[next_fail]
        ok = fits & (run_end >= times[None, :] + dur[:, None])
        first = ok.argmax(axis=1)
        starts: npt.NDArray[np.float64] = np.where(ok.any(axis=1), times[first], INF)
        return starts

    def _window(self, after: float) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.int64]]:
        if self._arrays is None:
            self._arrays = (np.fromiter(self._steps.keys(), dtype=np.float64, count=len(self._steps)),
                            np.fromiter(self._steps.values(), dtype=np.int64,
                                        count=len(self._steps)))
        times, avail = self._arrays
        after = max(after, float(times[0]))
        idx = int(np.searchsorted(times, after, side="right")) - 1
        times = times[idx:].copy()
        times[0] = after
        return times, avail[idx:]

    def steps(self, after: float | None = None) -> Steps:
        """The step function from ``after`` (default: the origin) on."""
        start = self.origin if after is None else max(after, self.origin)
        first: list[tuple[float, int]] = [(start, self.available(start))]
        rest = [(float(t), int(self._steps[t]))
                for t in self._steps.irange(start, None, inclusive=(False, True))]
        return tuple(first + rest)

    def __len__(self) -> int:
        return len(self._steps)

    def __repr__(self) -> str:
        return f"Profile(capacity={self.capacity}, steps={list(self.steps())})"


def first_fit_multi(profiles: Mapping[str, Profile], hosts: Mapping[str, int],
                    duration: float, after: float) -> float:
    """Earliest start ``>= after`` where every cluster's share fits for ``duration``.

    Iterates each cluster's :meth:`Profile.first_fit` to a common fixpoint; inf when
    some share never fits (more hosts than the cluster will ever have free).
    """
    wanted = [(cid, n) for cid, n in hosts.items() if n > 0]
    t = after
    for _ in range(100_000):
        moved = t
        for cid, n in wanted:
            moved = profiles[cid].first_fit(n, duration, moved)
            if moved == INF:
                return INF
        if moved == t:
            return t
        t = moved
    raise RuntimeError("first_fit_multi did not converge")  # pragma: no cover - a bug
