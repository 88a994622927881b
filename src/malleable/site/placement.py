"""Placement where the user's copies are: a wrapper around any policy.

A user's job waits held on the sites where it was submitted (one copy per site; one
site when ``--site`` fixed it). The policy places jobs as it does in the simulator
(KOALA's placement queue, tries and worst fit), but a job can only start where it
has a copy. So when any waiting job has copies, the policy decides **site by site**:
once per site, most available nodes first (worst fit across sites), on a view of that
site alone with the waiting jobs that have a copy there (and fit it) and have not been
placed yet. A job that cannot start where its copies are thereby makes the policy
shrink jobs *there* (PWA), instead of being "placed" on a site it cannot go to and
deferred forever (which is what a single decision over all sites did: worst fit chose
the emptier site without a copy). A job deferred on every site counts one failed try.
Without copies the policy decides once over all sites, as in the simulator; a
placement on a site without a copy is then moved to a copy's site if it fits there,
else deferred. A job listed with no site is shown to the policy on no site (the service
is still waiting for copies its tag announced): it is neither placed nor deferred. Pure:
it reads only the view and the map of copies.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from malleable.model import ClusterView, Defer, Place, View, WaitingJob
from malleable.policies.base import Decision, Policy, Steps, negotiate


@dataclass
class CopiesPolicy:
    """``inner``'s decisions, with each placement kept to the job's own sites."""

    inner: Policy
    sites: Mapping[str, frozenset[str]]
    """The sites holding a waiting copy of each job (a job not listed: any site; listed
    with none: not placeable yet)."""

    @property
    def name(self) -> str:
        return self.inner.name

    def decide(self, view: View, now: float) -> Decision:
        if any(w.spec.id in self.sites for w in view.waiting):
            return self._site_by_site(view, now)
        return self._relay(view, negotiate(self.inner.decide(view, now)))

    def _site_by_site(self, view: View, now: float) -> Steps:
        placed: set[str] = set()
        deferred: list[str] = []
        order = sorted(view.clusters.values(), key=lambda c: (-c.available, c.name))
        for cluster in order:
            waiting = tuple(w for w in view.waiting
                            if w.spec.id not in placed and self._may_go(w, cluster, view))
            sub = replace(view, clusters={cluster.name: cluster}, waiting=waiting)
            steps = negotiate(self.inner.decide(sub, now))
            answer: int | None = None
            while True:
                try:
                    action = steps.send(answer)
                except StopIteration:
                    break
                if isinstance(action, Defer):
                    deferred.append(action.job_id)
                    answer = None
                    continue
                answer = yield action
                if isinstance(action, Place) and answer:
                    placed.add(action.job_id)
        for job_id in dict.fromkeys(deferred):
            if job_id not in placed:
                yield Defer(job_id)

    def _may_go(self, job: WaitingJob, cluster: ClusterView, view: View) -> bool:
        """Whether ``job`` is shown to the policy on ``cluster``: it has a copy there and
        fits it, or the site is the largest of its copies (where a job too large for all
        of them is then refused as infeasible)."""
        sites = self.sites.get(job.spec.id)
        if sites is None:
            return True
        if cluster.name not in sites:
            return False
        if job.spec.min_size <= cluster.nodes - cluster.reserve:
            return True
        mine = [view.clusters[s] for s in sites if s in view.clusters]
        return max(mine, key=lambda c: (c.nodes - c.reserve, c.name)).name == cluster.name

    def _relay(self, view: View, steps: Steps) -> Steps:
        answer: int | None = None
        while True:
            try:
                action = steps.send(answer)
            except StopIteration:
                return
            if isinstance(action, Place):
                moved = self.where(view, action)
                if moved is None:
                    yield Defer(action.job_id)
                    answer = 0
                    continue
                action = moved
            answer = yield action

    def where(self, view: View, place: Place) -> Place | None:
        """The placement on a site with a copy of the job, or None if none fits."""
        sites = self.sites.get(place.job_id)
        if sites is None or place.cluster in sites:
            return place
        fits = [view.clusters[s] for s in sites
                if s in view.clusters and view.clusters[s].online
                and view.clusters[s].available >= place.size]
        if not fits:
            return None
        best = max(fits, key=lambda c: (c.available, c.name))
        return Place(place.job_id, best.name, place.size)
