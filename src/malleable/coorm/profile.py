"""Cluster availability profiles (CAPs): available hosts as a step function of time.

A :class:`Profile` maps each breakpoint time to the number of hosts available from
that time until the next breakpoint; the last step lasts forever. Inserting an
allocation, querying a time and scanning for the first hole where a request fits
are binary searches and list scans over sorted breakpoints.

Times are seconds (floats); host counts are ints. A profile starts at its
``origin`` (the time the view was computed): asking about earlier times answers
for the origin.
"""

from __future__ import annotations

import math
import operator
from bisect import bisect_left, bisect_right
from collections.abc import Iterable, Iterator, Mapping, Sequence
from itertools import islice
from typing import overload

import numpy as np
import numpy.typing as npt

INF = math.inf



class Cap(Sequence[tuple[float, int]]):
    """A serialised CAP: steps ``(t0, n0), (t1, n1), ...``, ``n_k`` hosts from ``t_k`` on.

    Stored as two columns (times, hosts) so that copying a view out of a profile and
    comparing two views are a few C-level tuple operations; it still reads, iterates
    and compares equal as the sequence of ``(time, hosts)`` pairs.
    """

    __slots__ = ("_hash", "hosts", "times")

    def __init__(self, times: Sequence[float], hosts: Sequence[int]) -> None:
        if len(times) != len(hosts):
            raise ValueError("a CAP needs as many times as host counts")
        self.times: tuple[float, ...] = tuple(times)
        self.hosts: tuple[int, ...] = tuple(hosts)
        self._hash: int | None = None

    @classmethod
    def of(cls, steps: Iterable[tuple[float, int]]) -> Cap:
        if isinstance(steps, Cap):
            return steps
        pairs = list(steps)
        return cls([float(t) for t, _ in pairs], [int(n) for _, n in pairs])

    def __len__(self) -> int:
        return len(self.times)

    @overload
    def __getitem__(self, index: int) -> tuple[float, int]: ...
    @overload
    def __getitem__(self, index: slice) -> Cap: ...
    def __getitem__(self, index: int | slice) -> tuple[float, int] | Cap:
        if isinstance(index, slice):
            return Cap(self.times[index], self.hosts[index])
        return self.times[index], self.hosts[index]

    def __iter__(self) -> Iterator[tuple[float, int]]:
        return zip(self.times, self.hosts, strict=True)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Cap):
            return self.times == other.times and self.hosts == other.hosts
        if isinstance(other, tuple | list):
            return tuple(self) == tuple(other)
        return NotImplemented

    def __hash__(self) -> int:
        if self._hash is None:
            self._hash = hash((self.times, self.hosts))
        return self._hash

    def __repr__(self) -> str:
        return f"Cap({list(self)})"

    def same_future(self, new: Cap) -> bool:
        """Whether this CAP says the same as ``new`` from ``new``'s first time on."""
        i = bisect_right(self.times, new.times[0]) - 1
        if i < 0:
            return False
        return (self.hosts[i] == new.hosts[0] and self.times[i + 1:] == new.times[1:]
                and self.hosts[i + 1:] == new.hosts[1:])


#: The type of a serialised CAP.
Steps = Cap


class Profile:
    """Available hosts over time on one cluster (a right-continuous step function).

    The breakpoints live in two parallel sorted lists (times, hosts) searched with
    ``bisect``: at the sizes CooRM sees (hundreds to thousands of steps) an insert
    is a short ``memmove``, 15 times faster than a ``SortedDict`` here (measured
    in benchmarks/bench_coorm.py), and scans read the lists directly.
    """

    __slots__ = ("_arrays", "_hosts", "_times", "capacity")

    def __init__(self, capacity: int, origin: float = 0.0) -> None:
        if capacity < 0:
            raise ValueError(f"capacity {capacity} is negative")
        if not math.isfinite(origin):
            raise ValueError(f"origin {origin} is not finite")
        self.capacity = capacity
        self._times: list[float] = [origin]
        self._hosts: list[int] = [capacity]
        self._arrays: tuple[npt.NDArray[np.float64], npt.NDArray[np.int64]] | None = None

    # ------------------------------------------------------------------ building

    @classmethod
    def from_steps(cls, capacity: int, steps: Iterable[tuple[float, int]]) -> Profile:
        """A profile from serialised steps (the first one sets the origin)."""
        if isinstance(steps, Cap):
            times, hosts = list(steps.times), list(steps.hosts)
        else:
            items = list(steps)
            times = [float(t) for t, _ in items]
            hosts = [int(n) for _, n in items]
        if not times:
            raise ValueError("a profile needs at least one step")
        if not all(map(operator.lt, times, islice(times, 1, None))):
            raise ValueError(f"step times must increase strictly: {times}")
        if min(hosts) < -capacity or max(hosts) > capacity:
            raise ValueError(f"a step is outside [-{capacity}, {capacity}] hosts")
        if not math.isfinite(times[0]):
            raise ValueError(f"origin {times[0]} is not finite")
        prof = cls.__new__(cls)
        prof.capacity = capacity
        prof._times, prof._hosts = times, hosts
        prof._arrays = None
        return prof

    def copy(self) -> Profile:
        return Profile.from_steps(self.capacity, zip(self._times, self._hosts, strict=True))

    @property
    def origin(self) -> float:
        return self._times[0]

    def add(self, start: float, end: float, delta: int) -> None:
        """Change availability by ``delta`` hosts over ``[start, end)`` (``end`` may be inf)."""
        times, hosts = self._times, self._hosts
        start = max(start, times[0])
        if not end > start or delta == 0:
            return
        self._arrays = None
        i = bisect_right(times, start) - 1
        if times[i] != start:
            i += 1
            times.insert(i, start)
            hosts.insert(i, hosts[i - 1])
        j = bisect_left(times, end, lo=i)
        if j < len(times) and times[j] != end and math.isfinite(end):
            times.insert(j, end)
            hosts.insert(j, hosts[j - 1])
        elif j == len(times) and math.isfinite(end):
            times.append(end)
            hosts.append(hosts[-1])
        for k in range(i, j):
            hosts[k] += delta
        if j < len(times) and hosts[j] == hosts[j - 1]:  # merge redundant breakpoints
            del times[j], hosts[j]
        if i > 0 and hosts[i] == hosts[i - 1]:
            del times[i], hosts[i]

    def reserve(self, start: float, end: float, hosts: int) -> None:
        """Take ``hosts`` over ``[start, end)``; ValueError if they are not all available."""
        if hosts > self.min_available(start, end):
            raise ValueError(f"{hosts} hosts are not available over [{start}, {end})")
        self.add(start, end, -hosts)

    def _snapshot(self) -> tuple[list[float], list[int]]:
        return self._times, self._hosts

    # ------------------------------------------------------------------ queries

    def available(self, t: float) -> int:
        """Hosts available at time ``t``."""
        times, hosts = self._snapshot()
        return hosts[max(0, bisect_right(times, t) - 1)]

    def min_available(self, start: float, end: float) -> int:
        """Fewest hosts available at any time in ``[start, end)``."""
        times, hosts = self._snapshot()
        i = max(0, bisect_right(times, start) - 1)
        j = bisect_left(times, end, lo=i + 1) if end > start else i + 1
        return min(hosts[i:max(j, i + 1)])

    def first_fit(self, hosts: int, duration: float, after: float) -> float:
        """Earliest start ``>= after`` with ``hosts`` available for ``duration`` (inf if never)."""
        times, avail = self._snapshot()
        cand = max(after, times[0])
        if hosts <= 0:
            return cand
        size = len(times)
        i = max(0, bisect_right(times, cand) - 1)
        while True:
            while avail[i] < hosts:
                i += 1
                if i == size:
                    return INF
                cand = times[i]
            j = i + 1
            end = cand + duration
            while j < size and times[j] < end:
                if avail[j] < hosts:
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
            times_l, hosts_l = self._snapshot()
            self._arrays = (np.array(times_l, dtype=np.float64),
                            np.array(hosts_l, dtype=np.int64))
        times, avail = self._arrays
        after = max(after, float(times[0]))
        idx = int(np.searchsorted(times, after, side="right")) - 1
        times = times[idx:].copy()
        times[0] = after
        return times, avail[idx:]

    def steps(self, after: float | None = None) -> Steps:
        """The step function from ``after`` (default: the origin) on."""
        times, hosts = self._snapshot()
        start = times[0] if after is None else max(after, times[0])
        i = max(0, bisect_right(times, start) - 1)
        cap = Cap.__new__(Cap)
        cap.times = (start, *times[i + 1:])
        cap.hosts = tuple(hosts[i:])
        cap._hash = None
        return cap

    def breakpoints(self, after: float, limit: int) -> list[float]:
        """The first ``limit`` times after ``after`` where availability changes."""
        i = bisect_right(self._times, after)
        return self._times[i:i + limit]

    def __len__(self) -> int:
        return len(self._times)

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
