"""The RMS policy of section III-C, as a pure function.

First-come-first-serve with repeated conservative backfilling over one profile
per cluster: profiles start from what running applications (and fair-start
holds, and load the RMS does not manage) occupy; then, for each waiting
application in subscription order, (1) its view is the current profiles, (2) its
request goes into the first hole where it fits, (3) the profiles take that
allocation. A request that can never fit gets an infinite start and takes nothing.

No I/O and no clock: the caller passes ``now`` and gets start times and views back.
To send only views that changed, every profile carries a *version*: an interned
id of the chain of allocations that built it, so an application whose clusters
carry the same versions as in the last run has the same view without comparing it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from malleable.coorm.profile import INF, Profile, Steps, first_fit_multi
from malleable.coorm.protocol import Request


@dataclass(frozen=True, slots=True)
class Busy:
    """Hosts of ``cid`` taken from now until ``end`` (inf: until further notice)."""

    cid: str
    hosts: int
    end: float


@dataclass(frozen=True, slots=True)
class Waiting:
    """An application that has not started: its clusters and current request."""

    app: str
    clusters: tuple[str, ...]
    request: Request | None


@dataclass(slots=True)
class Interner:
    """Gives each distinct hashable value a small int id (profile versions).

    Ids keep counting up when the table is cleared (past ``limit`` entries), so an
    old id never names a new value: clearing only costs comparisons of content.
    """

    ids: dict[object, int] = field(default_factory=dict)
    limit: int = 1_000_000
    issued: int = 0

    def id(self, value: object) -> int:
        found = self.ids.get(value)
        if found is None:
            if len(self.ids) >= self.limit:
                self.ids.clear()
            self.issued += 1
            found = self.ids[value] = self.issued
        return found


@dataclass(slots=True)
class Schedule:
    """The result of one policy run."""

    starts: dict[str, float] = field(default_factory=dict)
    """Start time per waiting application with a request (inf: not in sight)."""
    versions: dict[str, dict[str, int]] = field(default_factory=dict)
    """Per application, the version of each cluster profile in its view."""
    views: dict[str, dict[str, Steps]] = field(default_factory=dict)
    """The CAPs of the views whose version differs from ``known`` (to compare and send)."""
    profiles: dict[str, Profile] = field(default_factory=dict)
    """The profiles after every allocation (the RMS's own prediction)."""
    placed: dict[str, tuple[object, float]] = field(default_factory=dict)
    """Per application, what its placement depended on and the start found."""


def schedule(now: float, capacities: Mapping[str, int], busy: Sequence[Busy],
             waiting: Sequence[Waiting], known: Mapping[str, Mapping[str, int]],
             interner: Interner,
             placed: Mapping[str, tuple[object, float]] | None = None) -> Schedule:
    """One run of the policy at ``now`` (see the module docstring).

    ``placed`` is the previous run's :attr:`Schedule.placed`: a request placed on
    profiles of the same versions goes back into the same hole without a search.
    """
    placed = placed or {}
    profiles = {cid: Profile(cap, now) for cid, cap in capacities.items()}
    base: dict[str, list[tuple[float, int]]] = {cid: [] for cid in capacities}
    for b in busy:
        profiles[b.cid].add(now, b.end, -b.hosts)
        base[b.cid].append((b.end, b.hosts))
    version = {cid: interner.id(("base", tuple(sorted(items))))
               for cid, items in base.items()}
    out = Schedule(profiles=profiles)
    for w in waiting:
        seen = known.get(w.app, {})
        mine = {cid: version[cid] for cid in w.clusters}
        out.versions[w.app] = mine
        stale = {cid: profiles[cid].steps(now) for cid in w.clusters if seen.get(cid) != mine[cid]}
        if stale:
            out.views[w.app] = stale
        if w.request is None:
            continue
        key = (w.request.key(), tuple(version.get(c, -1) for c, _ in w.request.key()[0]))
        memo = placed.get(w.app)
        if memo is not None and memo[0] == key and now <= memo[1] < INF:
            start = memo[1]  # same request on the same profiles: the same hole
            _take(profiles, w.request, start)
        else:
            start = _place(profiles, w.request, now)
        out.placed[w.app] = (key, start)
        out.starts[w.app] = start
        if start < INF:
            for cid, n in w.request.hosts.items():
                if n > 0:
                    version[cid] = interner.id((version[cid], start, w.request.duration, n))
    return out


def _place(profiles: Mapping[str, Profile], request: Request, now: float) -> float:
    if any(cid not in profiles for cid, n in request.hosts.items() if n > 0):
        return INF
    start = first_fit_multi(profiles, request.hosts, request.duration, now)
    if start < INF:
        _take(profiles, request, start)
    return start


def _take(profiles: Mapping[str, Profile], request: Request, start: float) -> None:
    for cid, n in request.hosts.items():
        if n > 0:
            profiles[cid].add(start, start + request.duration, -n)
