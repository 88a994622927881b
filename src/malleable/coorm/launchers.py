"""Launchers: an application's resource selection working on its CooRM view.

A :class:`Launcher` keeps the view the RMS sent it (one CAP per subscribed
cluster, the CINFOs and the ICINFO), runs its application's selection on it and
says which request to send. Selection is memoized on the view: the number of
distinct views a launcher selected on is the paper's *number of computed
configurations*. The same object serves the simulator and the network client.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from malleable.coorm.profile import Profile, Steps
from malleable.coorm.protocol import (
    AVAILABILITY,
    Change,
    ClusterInfo,
    Filter,
    Link,
    Request,
)
from malleable.coorm.resources import Platform
from malleable.coorm.selection import Choice, best_single_cluster, cem_select
from malleable.workloads.coorm_apps import App, Cem

logger = logging.getLogger(__name__)

ViewKey = tuple[tuple[str, Steps], ...]


@dataclass(slots=True)
class SelectionStats:
    computed: int = 0
    """Selections run on a view not seen before (memo misses)."""
    reused: int = 0
    """Selections answered from the memo."""
    evaluated: int = 0
    """Configurations whose completion time the selections computed."""


class Launcher:
    """The RMS-facing half of an application (section III-B, steps 1-10)."""

    def __init__(self, name: str, app: App, filter: Filter | None = None,
                 adaptation_delay: float = 0.0) -> None:
        if adaptation_delay < 0:
            raise ValueError(f"adaptation delay {adaptation_delay} is negative")
        self.name = name
        self.app = app
        self.filter = filter or Filter()
        self.adaptation_delay = adaptation_delay
        self.caps: dict[str, Steps] = {}
        self.infos: dict[str, ClusterInfo] = {}
        self.clusters_known = False
        self.links: tuple[Link, ...] = ()
        self.stats = SelectionStats()
        self.sent: Request | None = None
        self._memo: dict[ViewKey, Choice] = {}
        self._platform: Platform | None = None
        self._profiles: dict[str, tuple[Steps, Profile]] = {}

    # ---------------------------------------------------------------- inputs

    def set_clusters(self, infos: Iterable[ClusterInfo]) -> None:
        self.infos = {i.cid: i for i in infos}
        self.clusters_known = True
        self._platform = None

    def set_links(self, links: Iterable[Link]) -> None:
        self.links = tuple(links)
        self._platform = None

    def apply(self, changes: Iterable[Change]) -> bool:
        """Update the local view; True when some availability changed."""
        changed = False
        for ch in changes:
            if ch.type == AVAILABILITY and ch.cap is not None:
                self.caps[ch.cid] = ch.cap
                changed = True
        return changed

    def infeasible(self) -> str:
        """Why no cluster the service described can ever run the application ("" when
        one can, or before the clusters are known): a request that can never start."""
        if not self.clusters_known:
            return ""
        usable = [i for i in self.infos.values() if self.filter.accepts(i)]
        if not usable:
            return (f"{self.name}: no cluster of the service passes the launcher's filter "
                    f"({len(self.infos)} clusters sent)")
        if isinstance(self.app, Cem) or any(self.app.max_hosts(i.hosts) > 0 for i in usable):
            return ""
        return (f"{self.name}: a {self.app.kind} application of {self.app.hosts} hosts fits no "
                f"cluster of the service (largest: {max(i.hosts for i in usable)} hosts)")

    # ---------------------------------------------------------------- selection

    def view_key(self) -> ViewKey:
        return tuple(sorted(self.caps.items()))

    def choose(self) -> Choice:
        """The configuration that ends first in the current view (memoized)."""
        key = self.view_key()
        found = self._memo.get(key)
        if found is not None:
            self.stats.reused += 1
            return found
        choice = self._select()
        self._memo[key] = choice
        self.stats.computed += 1
        self.stats.evaluated += choice.evaluated
        return choice

    def next_request(self) -> Request | None:
        """The request to send now, or None when it equals the last one sent."""
        if not self.caps:
            return None
        choice = self.choose()
        req = Request(hosts=dict(choice.hosts), duration=choice.duration)
        if self.sent is not None and self.sent.key() == req.key():
            return None
        self.sent = req
        return req

    def runtime(self, hosts: Mapping[str, int]) -> float:
        """How long the application really runs on ``hosts``."""
        platform = self.platform()
        if isinstance(self.app, Cem):
            return self.app.runtime(hosts, platform)
        (cid, n), = [(c, k) for c, k in hosts.items() if k > 0]
        return self.app.runtime_on(n, platform.info(cid).speed)

    def platform(self) -> Platform:
        if self._platform is None:
            known = [self.infos[c] for c in sorted(self.infos)]
            self._platform = Platform(tuple(known), self.links)
        return self._platform

    def _profile(self, cid: str) -> Profile:
        steps = self.caps[cid]
        cached = self._profiles.get(cid)
        if cached is None or cached[0] is not steps:  # rebuilt only for a changed CAP
            cached = (steps, Profile.from_steps(self.infos[cid].hosts, steps))
            self._profiles[cid] = cached
        return cached[1]

    def _select(self) -> Choice:
        platform = self.platform()
        clusters = [c for c in sorted(self.caps) if c in self.infos]
        profiles = {c: self._profile(c) for c in clusters}
        after = max(steps[0][0] for steps in self.caps.values())
        if isinstance(self.app, Cem):
            return cem_select(self.app, profiles, platform, clusters, after)
        return best_single_cluster(self.app, profiles, platform, clusters, after)
