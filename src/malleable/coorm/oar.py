"""The OAR-like baseline of section IV ("OARsim"): moldable jobs under repeated CBF.

Each job is submitted with the list of every (cluster, host count, wall time)
configuration it can run in; at every scheduling pass the scheduler goes through
the waiting jobs in submission order and, for each, picks the configuration that
completes first in the current profiles (conservative backfilling), then reserves
it. Passes run when a job arrives or ends, at most once per re-policy interval.

``release_delay`` keeps an ended job's hosts busy that long (0 in OAR; set it to
CooRM's fair-start delay to compare schedules one for one).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial

from malleable.coorm.profile import INF, Profile
from malleable.coorm.protocol import Filter, StartNotify
from malleable.coorm.resources import Platform
from malleable.coorm.selection import best_single_cluster
from malleable.coorm.sim import JobResult, SimResult, Traffic, at, wake_at
from malleable.sim.engine import ARRIVAL, END, Engine
from malleable.workloads.coorm import SimJob
from malleable.workloads.coorm_apps import Cem


@dataclass(slots=True)
class _Running:
    cid: str
    rids: list[str]
    deadline: float


def _filter(job: SimJob) -> Filter:
    return job.filter or Filter()


def submission_bytes(job: SimJob, platform: Platform) -> tuple[int, int]:
    """(JSON, CDR-like) bytes of a job submission listing every configuration."""
    configs = []
    for info in platform.clusters:
        if not _filter(job).accepts(info):
            continue
        app = job.app
        if isinstance(app, Cem):
            raise ValueError("the OAR-like baseline cannot enumerate CEM configurations")
        upto = app.max_hosts(info.hosts)
        if upto:
            walltimes = app.walltimes(info.speed, upto)
            configs += [(info.cid, n + 1, float(w)) for n, w in enumerate(walltimes)
                        if math.isfinite(w)]
    json_len = len('{"v":1,"type":"submit","configs":[]}\n') + sum(
        len(f'["{c}",{n},{w!r}],') for c, n, w in configs) - (1 if configs else 0)
    cdr_len = 12 + 4 + 4 + sum(4 + ((len(c) + 4) // 4) * 4 + 4 + 8 for c, _, _ in configs)
    return json_len, cdr_len


class OarSimulation:
    """Discrete-event simulation of the OAR-like moldable scheduler."""

    def __init__(self, platform: Platform, jobs: Sequence[SimJob],
                 repolicy_interval: float = 1.0, release_delay: float = 0.0,
                 count_json: bool = False) -> None:
        self.platform = platform
        self.jobs = sorted(jobs, key=lambda j: j.submit)
        self.interval = repolicy_interval
        self.release_delay = release_delay
        self.traffic = Traffic(json=count_json)
        self.results = {j.name: JobResult(j.name, j.app.kind, j.submit) for j in self.jobs}
        self.free = {c.cid: [f"{c.cid}-h{k:04d}" for k in range(c.hosts)]
                     for c in platform.clusters}
        self.computed = 0
        self.passes = 0
        self._waiting: list[SimJob] = []
        self._running: dict[str, _Running] = {}
        self._holds: list[tuple[float, str, list[str]]] = []
        self._planned: dict[str, float] = {}
        self._dirty = False
        self._last = -INF
        self._engine = Engine(0.0)
        self._wakeups: set[float] = set()

    def run(self) -> SimResult:
        started = time.process_time()
        for job in self.jobs:
            self._push(job.submit, ARRIVAL, partial(self._arrive, job))
        self._engine.run(self._settle)
        return SimResult("oar", list(self.results.values()), computed=self.computed,
                         evaluated=self.computed, traffic=self.traffic,
                         policy_runs=self.passes, cpu_time=time.process_time() - started)

    def _push(self, t: float, prio: int, action: Callable[[float], None]) -> None:
        at(self._engine, t, prio, action)

    def _arrive(self, job: SimJob, now: float) -> None:
        json_len, cdr_len = submission_bytes(job, self.platform)
        self.traffic.messages += 1
        if self.traffic.json:
            self.traffic.json_bytes += json_len
        self.traffic.cdr_bytes += cdr_len
        self.traffic.by_type["submit"] = self.traffic.by_type.get("submit", 0) + cdr_len
        self.traffic.sent_by_type["submit"] = self.traffic.sent_by_type.get("submit", 0) + 1
        self._waiting.append(job)
        self._dirty = True

    def _end(self, name: str, now: float) -> None:
        run = self._running.pop(name)
        self.results[name].end = now
        release = min(now + self.release_delay, run.deadline)
        if release <= now:
            self._give_back(run.cid, run.rids)
        else:
            self._holds.append((release, run.cid, run.rids))
        self._dirty = True

    def _give_back(self, cid: str, rids: list[str]) -> None:
        self.free[cid].extend(rids)
        self.free[cid].sort()

    def _settle(self, now: float) -> bool:
        """The engine's step hook: the scheduler runs last at each instant."""
        kept = []
        for release, cid, rids in self._holds:
            if release <= now:
                self._give_back(cid, rids)
                self._dirty = True
            else:
                kept.append((release, cid, rids))
        self._holds = kept
        if any(t <= now for t in self._planned.values()):
            self._dirty = True
        if self._dirty and now >= self._last + self.interval:
            self._pass(now)
        times = [r for r, _, _ in self._holds] + list(self._planned.values())
        if self._dirty:
            times.append(self._last + self.interval)
        wake_at(self._engine, self._wakeups, now, min(times, default=INF))
        return True

    def _pass(self, now: float) -> None:
        self._dirty = False
        self._last = now
        self.passes += 1
        profiles = {c.cid: Profile(c.hosts, now) for c in self.platform.clusters}
        for run in self._running.values():
            profiles[run.cid].add(now, run.deadline, -len(run.rids))
        for release, cid, rids in self._holds:
            profiles[cid].add(now, release, -len(rids))
        starting = []
        self._planned = {}
        for job in self._waiting:
            if isinstance(job.app, Cem):
                raise ValueError("the OAR-like baseline cannot schedule CEM applications")
            accepts = _filter(job).accepts
            clusters = [c.cid for c in self.platform.clusters if accepts(c)]
            choice = best_single_cluster(job.app, profiles, self.platform, clusters, now)
            self.computed += choice.evaluated
            if choice.start == INF:
                continue
            (cid, n), = choice.hosts.items()
            profiles[cid].add(choice.start, choice.end, -n)
            if choice.start <= now:
                starting.append((job, cid, n, choice.duration))
            else:
                self._planned[job.name] = choice.start
        for job, cid, n, duration in starting:
            self._start(job, cid, n, duration, now)

    def _start(self, job: SimJob, cid: str, n: int, duration: float, now: float) -> None:
        app = job.app
        if isinstance(app, Cem):
            raise ValueError("the OAR-like baseline cannot schedule CEM applications")
        rids, self.free[cid] = self.free[cid][:n], self.free[cid][n:]
        if len(rids) < n:
            raise RuntimeError(f"{job.name}: planned on {n} hosts of {cid} but only "
                               f"{len(rids)} are free")
        self._waiting.remove(job)
        self._running[job.name] = _Running(cid, rids, now + duration)
        self.traffic.count(StartNotify(rids={cid: tuple(rids)}))
        result = self.results[job.name]
        result.start, result.hosts = now, {cid: n}
        runtime = app.runtime_on(n, self.platform.info(cid).speed)
        self._push(now + runtime, END, partial(self._end, job.name))


def simulate_oar(platform: Platform, jobs: Sequence[SimJob], repolicy_interval: float = 1.0,
                 release_delay: float = 0.0, count_json: bool = False) -> SimResult:
    """Run ``jobs`` under the OAR-like baseline (see :class:`OarSimulation`)."""
    return OarSimulation(platform, jobs, repolicy_interval, release_delay, count_json).run()
