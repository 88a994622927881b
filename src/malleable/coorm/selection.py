"""Resource selection: which configuration ends first, given availability profiles.

Shared by the CooRM launchers (selecting on their view) and the OAR-like baseline
(selecting on the scheduler's profiles), so both choose alike and the schedules
can be compared. Ties go to the fewest hosts, then to the first cluster.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from malleable.coorm.profile import INF, Profile, first_fit_multi
from malleable.coorm.resources import Platform
from malleable.workloads.coorm_apps import Cem, Rigid, SingleClusterApp

#: The CEM heuristic tries at most this many candidate start times.
CEM_CANDIDATES = 16
#: ... and shrinks a configuration that does not fit at most this many times.
CEM_SHRINKS = 6


@dataclass(frozen=True, slots=True)
class Choice:
    """A selected configuration: hosts per cluster, requested duration, expected times."""

    hosts: Mapping[str, int]
    duration: float
    start: float
    evaluated: int
    """Configurations whose completion time the selection computed."""

    @property
    def end(self) -> float:
        return self.start + self.duration


def best_single_cluster(app: SingleClusterApp, profiles: Mapping[str, Profile],
                        platform: Platform, clusters: Sequence[str], after: float) -> Choice:
    """The (cluster, host count) of ``app`` that completes first (CBF hole search)."""
    best: tuple[float, int, str, float, float] | None = None  # end, n, cid, start, duration
    evaluated = 0
    for cid in clusters:
        info = platform.info(cid)
        upto = app.max_hosts(info.hosts)
        if upto < 1:
            continue
        prof = profiles[cid]
        if isinstance(app, Rigid):
            n, duration = app.hosts, app.walltime / info.speed
            evaluated += 1
            start = prof.first_fit(n, duration, after)
            cand = (start + duration, n, cid, start, duration)
        else:
            durations = app.walltimes(info.speed, upto)
            evaluated += upto
            starts = prof.earliest_starts(durations, after)
            ends = starts + durations
            i = int(np.argmin(ends))
            cand = (float(ends[i]), i + 1, cid, float(starts[i]), float(durations[i]))
        if best is None or cand[0] < best[0] or (cand[0] == best[0] and cand[1] < best[1]):
            best = cand
    if best is None:  # fits no cluster: request the largest one; it never starts
        cid = max(clusters, key=lambda c: platform.info(c).hosts)
        return Choice({cid: app.hosts}, app.walltime, INF, evaluated)
    return Choice({best[2]: best[1]}, best[4], best[3], evaluated)


def cem_select(app: Cem, profiles: Mapping[str, Profile], platform: Platform,
               clusters: Sequence[str], after: float) -> Choice:
    """The CEM launcher's heuristic (after [10]): fastest clusters first, whole holes.

    For each candidate start (the view's first breakpoints), take the hosts free
    then on each cluster, adding clusters fastest first while that lowers the
    predicted run time; shrink the shares that are not free for the whole run and
    repeat; keep the configuration that ends first.
    """
    order = sorted(clusters, key=lambda c: (-platform.info(c).speed, c))
    best: Choice | None = None
    evaluated = 0
    for start in _candidate_starts(profiles, order, after):
        hosts, runtime, count = _greedy(app, profiles, platform, order, start)
        evaluated += count
        if not hosts:
            continue
        for _ in range(CEM_SHRINKS):
            fitting = {c: min(n, profiles[c].min_available(start, start + runtime))
                       for c, n in hosts.items()}
            if fitting == hosts:
                break
            hosts = {c: n for c, n in fitting.items() if n > 0}
            runtime = app.runtime(hosts, platform)
            evaluated += 1
        else:
            continue
        if hosts and (best is None or start + runtime < best.end):
            best = Choice(hosts, runtime, start, 0)
    if best is None:
        whole = {order[0]: platform.info(order[0]).hosts}
        runtime = app.runtime(whole, platform)
        start = first_fit_multi(profiles, whole, runtime, after)
        return Choice(whole, runtime, start, evaluated + 1)
    return Choice(dict(best.hosts), best.duration, best.start, evaluated)


def _candidate_starts(profiles: Mapping[str, Profile], order: Sequence[str],
                      after: float) -> list[float]:
    times = {after}
    for cid in order:
        times.update(profiles[cid].breakpoints(after, CEM_CANDIDATES))
    return sorted(times)[:CEM_CANDIDATES]


def _greedy(app: Cem, profiles: Mapping[str, Profile], platform: Platform,
            order: Sequence[str], start: float) -> tuple[dict[str, int], float, int]:
    hosts: dict[str, int] = {}
    runtime = math.inf
    evaluated = 0
    for cid in order:
        free = profiles[cid].available(start)
        if free <= 0:
            continue
        trial = {**hosts, cid: free}
        t = app.runtime(trial, platform)
        evaluated += 1
        if t < runtime:
            hosts, runtime = trial, t
    return hosts, runtime, evaluated
