"""The CooRM RMS as a state machine driven by messages and a clock it is given.

:class:`CooRMCore` does no I/O and reads no clock: the in-process simulator and
the network service both feed it launcher messages with the current time and
deliver what it returns, so one implementation serves both. It runs the policy
(:mod:`malleable.coorm.policy`) at most once per re-policy interval, keeps a
done application's hosts for the fair-start delay, allocates host ids (RIDs) to
starting applications and kills those that overrun their allocation.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from malleable.coorm.policy import Busy, Interner, Waiting, schedule
from malleable.coorm.profile import INF, Cap, Steps
from malleable.coorm.protocol import (
    AVAILABILITY,
    Change,
    ChangeNotify,
    ClustersInfo,
    Done,
    Error,
    Filter,
    InterClusterInfo,
    KillNotify,
    ListClustersInfo,
    ListInterClusterInfo,
    Message,
    Request,
    StartNotify,
    Subscribe,
    Subscribed,
)
from malleable.coorm.resources import Platform
from malleable.coorm.sources import CapSource, NoBackground

logger = logging.getLogger(__name__)

#: What the core asks its driver to deliver: (application id, message).
Outgoing = tuple[str, Message]


@dataclass(frozen=True, slots=True)
class CoreConfig:
    """The RMS parameters (section IV-A: 1 s and 5 s in the paper's simulations)."""

    repolicy_interval: float = 1.0
    fair_start: float = 5.0
    kill_grace: float = 0.0
    """Seconds past an allocation's end before the RMS kills the application."""

    def __post_init__(self) -> None:
        for name in ("repolicy_interval", "fair_start", "kill_grace"):
            value = getattr(self, name)
            if not (value >= 0 and math.isfinite(value)):
                raise ValueError(f"{name} must be a finite number >= 0, not {value}")


@dataclass(slots=True)
class AppRecord:
    id: str
    seq: int
    name: str
    filter: Filter
    clusters: tuple[str, ...]
    request: Request | None = None
    state: str = "waiting"  # waiting | running | ended
    start: float = INF
    deadline: float = INF
    rids: dict[str, tuple[str, ...]] = field(default_factory=dict)
    versions: dict[str, int] = field(default_factory=dict)
    caps: dict[str, Steps] = field(default_factory=dict)
    planned: float = INF
    view_changed: bool = False


@dataclass(slots=True)
class Hold:
    """Hosts of a done application kept busy until ``release`` (fair-start)."""

    cid: str
    rids: tuple[str, ...]
    release: float


@dataclass(slots=True)
class CoreStats:
    policy_runs: int = 0
    views_sent: int = 0
    starts: int = 0
    kills: int = 0


def same_future(old: Iterable[tuple[float, int]], new: Iterable[tuple[float, int]]) -> bool:
    """Whether ``old`` says the same as ``new`` from ``new``'s first time on."""
    return Cap.of(old).same_future(Cap.of(new))


class CooRMCore:
    """The RMS side of CooRM (see the module docstring)."""

    def __init__(self, platform: Platform, config: CoreConfig | None = None,
                 source: CapSource | None = None) -> None:
        self.platform = platform
        self.config = config or CoreConfig()
        self.source = source or NoBackground()
        self.apps: dict[str, AppRecord] = {}
        self.free: dict[str, list[str]] = {
            c.cid: [f"{c.cid}-h{k:04d}" for k in range(c.hosts)] for c in platform.clusters}
        self.holds: list[Hold] = []
        self.stats = CoreStats()
        self._seq = 0
        self._dirty = False
        self._last_run = -INF
        self._interner = Interner()
        self._placed: dict[str, tuple[object, float]] = {}
        self._out: list[Outgoing] = []

    # ---------------------------------------------------------------- messages

    def subscribe(self, msg: Subscribe, now: float) -> str:
        """Register an application; its id is in the Subscribed reply (and returned)."""
        self._seq += 1
        app_id = f"a{self._seq}"
        clusters = tuple(c.cid for c in self.platform.clusters if msg.filter.accepts(c))
        self.apps[app_id] = AppRecord(app_id, self._seq, msg.name, msg.filter, clusters)
        self._out.append((app_id, Subscribed(app=app_id)))
        self._dirty = True
        logger.debug("%s subscribed (%s) to %s", app_id, msg.name, clusters)
        return app_id

    def handle(self, app_id: str, msg: Message, now: float) -> None:
        """Take one launcher message; replies and notifications come from :meth:`advance`."""
        app = self.apps.get(app_id)
        if app is None or app.state == "ended":
            self._out.append((app_id, Error(message=f"unknown or ended application {app_id}")))
            return
        if isinstance(msg, ListClustersInfo):
            infos = tuple(self.platform.info(c) for c in app.clusters)
            self._out.append((app_id, ClustersInfo(clusters=infos)))
        elif isinstance(msg, ListInterClusterInfo):
            links = tuple(lk for lk in self.platform.links
                          if lk.a in app.clusters and lk.b in app.clusters)
            self._out.append((app_id, InterClusterInfo(links=links)))
        elif isinstance(msg, Request):
            self._request(app, msg)
        elif isinstance(msg, Done):
            self._end(app, now, killed=False)
        else:
            self._out.append((app_id, Error(message=f"unexpected {msg.TYPE} message")))

    def disconnect(self, app_id: str, now: float) -> None:
        """The launcher went away: a running application is done, a waiting one leaves."""
        app = self.apps.get(app_id)
        if app is not None and app.state != "ended":
            self._end(app, now, killed=False)

    def _request(self, app: AppRecord, msg: Request) -> None:
        unknown = [c for c, n in msg.hosts.items() if n > 0 and c not in app.clusters]
        if unknown:
            self._out.append((app.id, Error(message=f"request names clusters outside the "
                                                    f"subscription: {', '.join(unknown)}")))
            return
        if app.state != "waiting":
            self._out.append((app.id, Error(message="request after start is ignored")))
            return
        app.request = msg
        self._dirty = True

    def _end(self, app: AppRecord, now: float, killed: bool) -> None:
        if app.state == "running":
            release = now if killed else min(now + self.config.fair_start, app.deadline)
            for cid, rids in app.rids.items():
                if release <= now:
                    self._give_back(cid, rids)
                else:
                    self.holds.append(Hold(cid, rids, release))
        app.state = "ended"
        self._dirty = True

    def _give_back(self, cid: str, rids: Sequence[str]) -> None:
        self.free[cid].extend(rids)
        self.free[cid].sort()

    # ---------------------------------------------------------------- time

    def advance(self, now: float) -> list[Outgoing]:
        """Release holds, kill overruns, run the policy if due; the messages to deliver."""
        self._expire(now)
        if self._dirty and now >= self._last_run + self.config.repolicy_interval:
            self._run_policy(now)
        out, self._out = self._out, []
        return out

    def due(self, now: float) -> bool:
        """Whether :meth:`advance` at ``now`` would do something."""
        return bool(self._out) or self.next_wakeup() <= now

    def next_wakeup(self) -> float:
        """The next time :meth:`advance` has work, inf when idle."""
        times = [h.release for h in self.holds]
        times += [a.deadline + self.config.kill_grace for a in self.apps.values()
                  if a.state == "running"]
        runnable = self._last_run + self.config.repolicy_interval
        planned = [a.planned for a in self.apps.values() if a.state == "waiting"]
        if self._dirty:
            planned.append(runnable)
        return min(min(times, default=INF), max(min(planned, default=INF), runnable))

    def _expire(self, now: float) -> None:
        kept = []
        for h in self.holds:
            if h.release <= now:
                self._give_back(h.cid, h.rids)
                self._dirty = True
            else:
                kept.append(h)
        self.holds = kept
        for app in list(self.apps.values()):
            if app.state == "running" and app.deadline + self.config.kill_grace <= now:
                self.stats.kills += 1
                self._out.append((app.id, KillNotify(reason="allocation time exceeded")))
                self._end(app, now, killed=True)
            elif app.state == "waiting" and app.planned <= now:
                self._dirty = True

    # ---------------------------------------------------------------- policy

    def _run_policy(self, now: float) -> None:
        self._dirty = False
        self._last_run = now
        self.stats.policy_runs += 1
        waiting = sorted((a for a in self.apps.values() if a.state == "waiting"),
                         key=lambda a: a.seq)
        result = schedule(
            now, {c.cid: c.hosts for c in self.platform.clusters}, self._busy(now),
            [Waiting(a.id, a.clusters, a.request) for a in waiting],
            {a.id: a.versions for a in waiting}, self._interner, self._placed)
        self._placed = result.placed
        for app in waiting:
            fresh_view = self._notify_view(app, result.versions[app.id],
                                           result.views.get(app.id, {}))
            app.planned = result.starts.get(app.id, INF)
            if fresh_view and app.planned <= now:
                self._dirty = True  # it starts next run, on a request made from this view
        for app in waiting:
            if app.planned <= now and not self._dirty_for(app):
                self._start(app, now)

    def _busy(self, now: float) -> list[Busy]:
        grace = self.config.kill_grace
        busy = [Busy(cid, len(rids), a.deadline if a.deadline > now else a.deadline + grace)
                for a in self.apps.values() if a.state == "running"
                for cid, rids in a.rids.items()]
        busy += [Busy(h.cid, len(h.rids), h.release) for h in self.holds]
        busy += [b for b in self.source.busy(now) if b.cid in self.free]
        return busy

    def _notify_view(self, app: AppRecord, versions: dict[str, int],
                     fresh: dict[str, Steps]) -> bool:
        app.versions = versions
        changes = []
        for cid, steps in fresh.items():
            old = app.caps.get(cid)
            if old is None or not old.same_future(steps):
                app.caps[cid] = steps
                changes.append(Change(cid, AVAILABILITY, steps))
        app.view_changed = bool(changes)
        if changes:
            self.stats.views_sent += 1
            self._out.append((app.id, ChangeNotify(changes=tuple(changes))))
        return app.view_changed

    @staticmethod
    def _dirty_for(app: AppRecord) -> bool:
        """An application whose view just changed does not start on its older request."""
        return app.view_changed

    def _start(self, app: AppRecord, now: float) -> None:
        if app.request is None:  # cannot happen: a planned start implies a request
            return
        want = {c: n for c, n in app.request.hosts.items() if n > 0}
        background: dict[str, int] = {}
        for b in self.source.busy(now):
            background[b.cid] = background.get(b.cid, 0) + b.hosts
        if any(len(self.free[c]) - background.get(c, 0) < n for c, n in want.items()):
            logger.warning("%s: planned start at %s but its hosts are not free yet", app.id, now)
            app.planned = INF  # the event that frees them triggers the policy again
            return
        for cid, n in want.items():
            app.rids[cid] = tuple(self.free[cid][:n])
            del self.free[cid][:n]
        app.state = "running"
        app.start = now
        app.deadline = now + app.request.duration
        app.planned = INF
        self.stats.starts += 1
        self._out.append((app.id, StartNotify(rids=dict(app.rids))))
