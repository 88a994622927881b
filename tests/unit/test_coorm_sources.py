"""Background load from real clusters through the ResourceManager protocol."""

from __future__ import annotations

import math
from collections.abc import Sequence

from malleable.coorm.core import CooRMCore, CoreConfig
from malleable.coorm.policy import Busy
from malleable.coorm.protocol import ChangeNotify, Subscribe
from malleable.coorm.resources import Platform
from malleable.coorm.sources import NoBackground, ResourceManagerSource, busy_from_view
from malleable.model import ClusterView, JobKind, JobSpec, RunningJob
from malleable.resources import Capability, JobEvent


def _job(job_id: str, size: int, start: float, walltime: float | None) -> RunningJob:
    spec = JobSpec(job_id, JobKind.RIGID, size, size, size, walltime=walltime)
    return RunningJob(spec, "s1", size, start, managed=False)


class FakeManager:
    """A ResourceManager that reports a fixed view (unit-test double)."""

    name = "s1"
    capabilities: frozenset[Capability] = frozenset()

    def __init__(self, view: ClusterView) -> None:
        self.view = view

    def observe(self) -> ClusterView:
        return self.view

    def start(self, spec: JobSpec, size: int) -> int:
        return 0

    def offer_grow(self, job_id: str, offer: int) -> int:
        return 0

    def request_shrink(self, job_id: str, amount: int, mandatory: bool) -> int:
        return 0

    def cancel(self, job_id: str) -> None:
        return None

    def drain_events(self) -> Sequence[JobEvent]:
        return ()


VIEW = ClusterView("s1", nodes=10, idle=3, running={
    "1": _job("1", 4, 100.0, 600.0), "2": _job("2", 2, 0.0, None)}, speed=1.5)


def test_busy_from_view_uses_time_limits() -> None:
    busy = busy_from_view("s1", VIEW, now=200.0)
    # job 1 until 700, job 2 has no limit, 1 node down or unexplained
    assert busy == [Busy("s1", 4, 700.0), Busy("s1", 2, math.inf), Busy("s1", 1, math.inf)]
    assert busy_from_view("s1", VIEW, now=200.0, managed={"1"}) == [
        Busy("s1", 2, math.inf), Busy("s1", 1, math.inf)]
    late = busy_from_view("s1", VIEW, now=800.0)  # job 1 overran its limit: soon gone
    assert late[0] == Busy("s1", 4, 860.0)


def test_views_of_a_real_cluster_show_its_running_jobs() -> None:
    source = ResourceManagerSource({"s1": FakeManager(VIEW)})
    platform = Platform(source.clusters())
    assert platform.info("s1").hosts == 10 and platform.info("s1").speed == 1.5
    core = CooRMCore(platform, CoreConfig(0.0, 0.0), source=source)
    app = core.subscribe(Subscribe(), 200.0)
    views = [m for a, m in core.advance(200.0) if isinstance(m, ChangeNotify)]
    assert views and views[0].changes[0].cap == ((200.0, 3), (700.0, 7))
    assert app in core.apps
    assert NoBackground().busy(0.0) == ()
