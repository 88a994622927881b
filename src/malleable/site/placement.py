"""Placement where the user's copies are: a wrapper around any policy.

A user's job waits held on the sites where it was submitted (one copy per site; one
site when ``--site`` fixed it). The policy places jobs as it does in the simulator
(KOALA's placement queue, tries and worst fit); when it picks a site that has no copy
of the job, the wrapper moves the placement to the copy's site with the most
available nodes if the size fits there, and otherwise turns it into a
:class:`~malleable.model.Defer` (a failed try, as KOALA counts them). The policy
hears the size granted, or 0. Pure: it reads only the view and the map of copies.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from malleable.model import Defer, Place, View
from malleable.policies.base import Decision, Policy, Steps, negotiate


@dataclass
class CopiesPolicy:
    """``inner``'s decisions, with each placement kept to the job's own sites."""

    inner: Policy
    sites: Mapping[str, frozenset[str]]
    """The sites holding a waiting copy of each job (a job not listed: any site)."""

    @property
    def name(self) -> str:
        return self.inner.name

    def decide(self, view: View, now: float) -> Decision:
        return self._relay(view, negotiate(self.inner.decide(view, now)))

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
