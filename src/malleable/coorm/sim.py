"""CooRM in process: the RMS core and the launchers in one discrete-event simulation.

Launchers answer a new view "instantly" (the simulated clock does not move) unless
they have an adaptation delay, as in section IV. Every message goes through the
protocol's encoder so that its size is counted exactly as it would travel (JSON
bytes) and as the paper measured it (a CDR-like estimate).

Both run on the simulator's :class:`~malleable.sim.engine.Engine`. Events at the
same time run in this order: application ends, arrivals, launcher timers; then the
RMS runs last at that instant, as the engine's step hook (the OAR-like baseline
uses the same order).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import partial

from malleable.coorm.core import CooRMCore, CoreConfig
from malleable.coorm.launchers import Launcher
from malleable.coorm.protocol import (
    ChangeNotify,
    ClustersInfo,
    Done,
    Error,
    InterClusterInfo,
    KillNotify,
    ListClustersInfo,
    ListInterClusterInfo,
    Message,
    StartNotify,
    Subscribe,
    Subscribed,
    cdr_size,
    encode,
)
from malleable.coorm.resources import Platform
from malleable.sim.engine import ARRIVAL, END, TIMER, Engine
from malleable.workloads.coorm import SimJob

logger = logging.getLogger(__name__)

#: The RMS's wake-up events come after every other event of their instant.
RMS = TIMER + 1
#: Policy runs allowed at one simulated instant before we call it a livelock.
MAX_RUNS_PER_INSTANT = 100_000


@dataclass(slots=True)
class JobResult:
    name: str
    kind: str
    submit: float
    start: float = math.inf
    end: float = math.inf
    hosts: dict[str, int] = field(default_factory=dict)
    killed: bool = False


@dataclass(slots=True)
class Traffic:
    """Messages counted in both directions."""

    messages: int = 0
    json_bytes: int = 0
    """JSON bytes on the wire (counted only when ``json`` is set: encoding costs CPU)."""
    cdr_bytes: int = 0
    """Bytes in the paper's CDR-like encoding (always counted)."""
    json: bool = False
    by_type: dict[str, int] = field(default_factory=dict)
    """CDR-like bytes per message type (``changeNotify``, ``request``, ...)."""
    sent_by_type: dict[str, int] = field(default_factory=dict)
    """Messages per type."""
    cap_steps: int = 0
    """CAP steps sent in ``changeNotify`` messages (16 CDR bytes each)."""

    def count(self, msg: Message) -> None:
        self.messages += 1
        if self.json:
            self.json_bytes += len(encode(msg))
        size = cdr_size(msg)
        self.cdr_bytes += size
        self.by_type[msg.TYPE] = self.by_type.get(msg.TYPE, 0) + size
        self.sent_by_type[msg.TYPE] = self.sent_by_type.get(msg.TYPE, 0) + 1
        if isinstance(msg, ChangeNotify):
            self.cap_steps += sum(len(ch.cap) for ch in msg.changes if ch.cap is not None)


@dataclass(slots=True)
class SimResult:
    """What a run measured (the metrics of Fig. 6, and the schedule)."""

    system: str
    jobs: list[JobResult]
    computed: int = 0
    """The paper's *computed configurations* (see docs/coorm.md)."""
    evaluated: int = 0
    """Configurations whose completion time was computed (all selections)."""
    traffic: Traffic = field(default_factory=Traffic)
    policy_runs: int = 0
    cpu_time: float = 0.0

    def job(self, name: str) -> JobResult:
        for j in self.jobs:
            if j.name == name:
                return j
        raise KeyError(name)

    @property
    def makespan(self) -> float:
        ends = [j.end for j in self.jobs if math.isfinite(j.end)]
        return max(ends, default=0.0)


def at(engine: Engine, t: float, prio: int, action: Callable[[float], None]) -> None:
    """Schedule ``action(t)`` on ``engine`` at ``t``."""
    engine.at(t, partial(action, t), prio)


def wake_at(engine: Engine, wakeups: set[float], now: float, wake: float) -> None:
    """An RMS wake-up at ``wake`` (once per instant) if it lies ahead of ``now``."""
    if now < wake < math.inf and wake not in wakeups:
        wakeups.add(wake)
        at(engine, wake, RMS, wakeups.discard)


class CooRMSimulation:
    """Run a workload through :class:`CooRMCore` with in-process launchers."""

    def __init__(self, platform: Platform, jobs: Sequence[SimJob],
                 config: CoreConfig | None = None, count_json: bool = False) -> None:
        self.core = CooRMCore(platform, config)
        self.jobs = list(jobs)
        self.traffic = Traffic(json=count_json)
        self.results = {j.name: JobResult(j.name, j.app.kind, j.submit) for j in self.jobs}
        self._engine = Engine(0.0)
        self._launchers: dict[str, Launcher] = {}
        self._names: dict[str, str] = {}
        self._timers: set[str] = set()
        self._wakeups: set[float] = set()

    def run(self) -> SimResult:
        started = time.process_time()
        for job in self.jobs:
            self._push(job.submit, ARRIVAL, partial(self._arrive, job))
        self._engine.run(self._pump)
        cpu = time.process_time() - started
        stats = [la.stats for la in self._launchers.values()]
        return SimResult("coorm", list(self.results.values()),
                         computed=sum(s.computed for s in stats),
                         evaluated=sum(s.evaluated for s in stats), traffic=self.traffic,
                         policy_runs=self.core.stats.policy_runs, cpu_time=cpu)

    # ---------------------------------------------------------------- plumbing

    def _push(self, t: float, prio: int, action: Callable[[float], None]) -> None:
        at(self._engine, t, prio, action)

    def _pump(self, now: float) -> bool:
        """The engine's step hook: the RMS runs last at each instant."""
        for _ in range(MAX_RUNS_PER_INSTANT):
            if not self.core.due(now):
                break
            for app_id, msg in self.core.advance(now):
                self._deliver(app_id, msg, now)
        else:
            raise RuntimeError(f"the RMS did not settle at t={now}")
        wake_at(self._engine, self._wakeups, now, self.core.next_wakeup())
        return True

    def _send(self, app_id: str, msg: Message, now: float) -> None:
        self.traffic.count(msg)
        self.core.handle(app_id, msg, now)

    # ---------------------------------------------------------------- launcher side

    def _arrive(self, job: SimJob, now: float) -> None:
        launcher = Launcher(job.name, job.app, job.filter, job.adaptation_delay)
        msg = Subscribe(filter=launcher.filter, name=job.name)
        self.traffic.count(msg)
        app_id = self.core.subscribe(msg, now)
        self._launchers[app_id] = launcher
        self._names[app_id] = job.name
        self._send(app_id, ListClustersInfo(), now)
        self._send(app_id, ListInterClusterInfo(), now)

    def _deliver(self, app_id: str, msg: Message, now: float) -> None:
        self.traffic.count(msg)
        launcher = self._launchers[app_id]
        if isinstance(msg, ClustersInfo):
            launcher.set_clusters(msg.clusters)
        elif isinstance(msg, InterClusterInfo):
            launcher.set_links(msg.links)
        elif isinstance(msg, ChangeNotify):
            if launcher.apply(msg.changes):
                self._adapt(app_id, launcher, now)
        elif isinstance(msg, StartNotify):
            self._started(app_id, launcher, msg, now)
        elif isinstance(msg, KillNotify):
            result = self.results[self._names[app_id]]
            result.killed, result.end = True, now
        elif isinstance(msg, Error):
            raise RuntimeError(f"RMS error for {app_id}: {msg.message}")
        elif not isinstance(msg, Subscribed):
            raise RuntimeError(f"unexpected message to a launcher: {msg}")

    def _adapt(self, app_id: str, launcher: Launcher, now: float) -> None:
        if launcher.adaptation_delay <= 0:
            self._respond(app_id, now)
        elif app_id not in self._timers:
            self._timers.add(app_id)
            self._push(now + launcher.adaptation_delay, TIMER,
                       partial(self._timer, app_id))

    def _timer(self, app_id: str, now: float) -> None:
        self._timers.discard(app_id)
        if self.results[self._names[app_id]].start == math.inf:
            self._respond(app_id, now)

    def _respond(self, app_id: str, now: float) -> None:
        request = self._launchers[app_id].next_request()
        if request is not None:
            self._send(app_id, request, now)

    def _started(self, app_id: str, launcher: Launcher, msg: StartNotify, now: float) -> None:
        result = self.results[self._names[app_id]]
        result.start = now
        result.hosts = {c: len(r) for c, r in msg.rids.items()}
        runtime = launcher.runtime(result.hosts)
        self._push(now + runtime, END, partial(self._finish, app_id))

    def _finish(self, app_id: str, now: float) -> None:
        result = self.results[self._names[app_id]]
        if result.killed:
            return
        result.end = now
        self._send(app_id, Done(), now)


def simulate_coorm(platform: Platform, jobs: Sequence[SimJob],
                   config: CoreConfig | None = None, count_json: bool = False) -> SimResult:
    """Run ``jobs`` under CooRM on ``platform`` (see :class:`CooRMSimulation`)."""
    return CooRMSimulation(platform, jobs, config, count_json).run()
