"""The real-time driver on a fake clock: arrivals, polling, deadline, signals, prefetch."""

from __future__ import annotations

import os
import signal
from collections.abc import Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

import pytest

from malleable.clock import ScaledClock
from malleable.manager import Manager
from malleable.model import ClusterView, JobKind, JobSpec, JobState, RunningJob
from malleable.policies.koala import KoalaPolicy
from malleable.realtime import RealtimeDriver
from malleable.resources import Capability, JobEvent


class FakeTime:
    def __init__(self) -> None:
        self.t = 1000.0
        self.sleeps: list[float] = []

    def wall(self) -> float:
        return self.t

    def monotonic(self) -> float:
        return self.t

    def pause(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.t += seconds


@dataclass
class TimedCluster:
    """Jobs end ``runtime`` model seconds after they start; refresh counts prefetches."""

    name: str
    nodes: int
    clock: ScaledClock
    capabilities: frozenset[Capability] = frozenset()
    running: dict[str, tuple[JobSpec, int, float]] = field(default_factory=dict)
    events: list[JobEvent] = field(default_factory=list)
    refreshed: int = 0

    def refresh(self) -> None:
        self.refreshed += 1

    def observe(self) -> ClusterView:
        used = sum(size for _, size, _ in self.running.values())
        jobs = {j: RunningJob(s, self.name, n, t) for j, (s, n, t) in self.running.items()}
        return ClusterView(self.name, self.nodes, self.nodes - used, 0, MappingProxyType(jobs))

    def start(self, spec: JobSpec, size: int) -> int:
        now = self.clock.now()
        self.running[spec.id] = (spec, size, now)
        self.events.append(JobEvent(now, spec.id, JobState.RUNNING, size))
        return size

    def offer_grow(self, job_id: str, offer: int) -> int:
        return 0

    def request_shrink(self, job_id: str, amount: int, mandatory: bool) -> int:
        return 0

    def cancel(self, job_id: str) -> None:
        self.running.pop(job_id, None)

    def drain_events(self) -> Sequence[JobEvent]:
        now = self.clock.now()
        for job_id, (spec, _, began) in list(self.running.items()):
            if now >= began + (spec.runtime or 0.0):
                del self.running[job_id]
                self.events.append(JobEvent(now, job_id, JobState.COMPLETED, 0))
        events, self.events = self.events, []
        return events


def _jobs(n: int, gap: float, runtime: float) -> list[JobSpec]:
    return [JobSpec(f"r{i}", JobKind.RIGID, 2, 2, 2, submit_time=i * gap, app="fixed",
                    runtime=runtime) for i in range(n)]


def _driver(fake: FakeTime, jobs: list[JobSpec], scale: float = 0.1,
            poll: float = 1.0) -> tuple[RealtimeDriver, TimedCluster, list[float]]:
    clock = ScaledClock(fake.t, scale, wall=fake.wall)
    cluster = TimedCluster("c", 4, clock)
    manager = Manager(KoalaPolicy.named("pra", "fpsma"), {"c": cluster})
    flushed: list[float] = []
    driver = RealtimeDriver(manager, clock, list(reversed(jobs)), poll,
                            flush=lambda: flushed.append(fake.t), monotonic=fake.monotonic,
                            pause=fake.pause)
    return driver, cluster, flushed


def test_scaled_clock() -> None:
    clock = ScaledClock(100.0, 0.5, wall=lambda: 110.0)
    assert clock.now() == 20.0
    assert clock.from_epoch(101.0) == 2.0 and clock.to_epoch(2.0) == 101.0
    with pytest.raises(ValueError, match="positive"):
        ScaledClock(0.0, 0.0)


def test_runs_the_workload_in_scaled_time_until_every_job_ends() -> None:
    fake = FakeTime()
    driver, cluster, flushed = _driver(fake, _jobs(4, gap=50.0, runtime=30.0))
    outcome = driver.run()
    assert outcome.stopped == "done" and outcome.submitted == 4
    records = driver.manager.records
    assert all(r.state is JobState.COMPLETED for r in records.values())
    for i in range(4):  # submitted at its scaled time: 50 model s = 5 real s apart
        record = records[f"r{i}"]
        assert record.start is not None and record.end is not None
        assert i * 50.0 <= record.start <= i * 50.0 + 10.0  # within one 1-s poll (10 model s)
        assert 30.0 <= record.end - record.start <= 40.0
    assert cluster.refreshed == outcome.cycles  # prefetched once per cycle
    assert max(fake.sleeps) <= 1.0 and flushed
    # a 1-s poll over 15 real seconds of work: about 16 cycles, not thousands
    assert 12 <= outcome.cycles <= 20


def test_wakes_for_an_arrival_before_the_next_poll() -> None:
    fake = FakeTime()
    driver, _, _ = _driver(fake, _jobs(2, gap=3.0, runtime=1.0), scale=1.0, poll=10.0)
    driver.run()
    assert driver.manager.records["r1"].start == pytest.approx(3.0)


def test_deadline_stops_with_jobs_unfinished() -> None:
    fake = FakeTime()
    driver, _, flushed = _driver(fake, _jobs(3, gap=100.0, runtime=100.0))
    outcome = driver.run(deadline=5.0)
    assert outcome.stopped == "deadline"
    assert fake.t - 1000.0 == pytest.approx(5.0)
    assert driver.manager.unfinished > 0 and flushed


def test_sigterm_stops_gracefully_after_the_cycle() -> None:
    fake = FakeTime()
    driver, _, flushed = _driver(fake, _jobs(3, gap=100.0, runtime=100.0))
    driver.on_cycle = lambda now: os.kill(os.getpid(), signal.SIGTERM) if now > 20 else None
    previous = signal.getsignal(signal.SIGTERM)
    outcome = driver.run()
    assert outcome.stopped == "signal"
    assert driver.clock.now() == pytest.approx(30.0)  # the cycle at 30 was the last
    assert signal.getsignal(signal.SIGTERM) == previous  # handler restored
    assert flushed[-1] == fake.t


def test_poll_interval_must_be_positive() -> None:
    fake = FakeTime()
    clock = ScaledClock(fake.t, 1.0, wall=fake.wall)
    manager = Manager(KoalaPolicy.named("pra", "fpsma"), {})
    with pytest.raises(ValueError, match="poll interval"):
        RealtimeDriver(manager, clock, [], 0.0)


def test_a_failing_site_is_retried_then_gives_up() -> None:
    from malleable.errors import ExternalError

    fake = FakeTime()
    driver, cluster, _ = _driver(fake, _jobs(1, gap=1.0, runtime=5.0))
    failures = [3]
    observe = cluster.observe

    def flaky() -> ClusterView:
        if failures[0] > 0:
            failures[0] -= 1
            raise ExternalError("ssh vu: cannot connect")
        return observe()

    cluster.observe = flaky  # type: ignore[method-assign]
    assert driver.run().stopped == "done"  # three failed cycles, then it went on

    driver, cluster, _ = _driver(fake, _jobs(1, gap=1.0, runtime=5.0))
    driver.max_failures = 2

    def down() -> ClusterView:
        raise ExternalError("ssh vu: cannot connect")

    cluster.observe = down  # type: ignore[method-assign]
    with pytest.raises(ExternalError, match="cannot connect"):
        driver.run()


def _two_sites(fake: FakeTime, jobs: list[JobSpec],
               poll: float = 1.0) -> tuple[RealtimeDriver, TimedCluster, TimedCluster]:
    clock = ScaledClock(fake.t, 0.1, wall=fake.wall)
    good, bad = TimedCluster("good", 4, clock), TimedCluster("bad", 8, clock)
    manager = Manager(KoalaPolicy.named("pra", "fpsma"), {"good": good, "bad": bad})
    driver = RealtimeDriver(manager, clock, jobs, poll, monotonic=fake.monotonic,
                            pause=fake.pause)
    return driver, good, bad


def test_a_dead_site_never_stops_the_others() -> None:
    from malleable.errors import ExternalError

    fake = FakeTime()
    driver, _, bad = _two_sites(fake, _jobs(6, gap=10.0, runtime=20.0))

    def down() -> None:
        raise ExternalError("ssh bad: connection refused")

    bad.refresh = down  # type: ignore[method-assign]
    outcome = driver.run()
    assert outcome.stopped == "done"
    records = driver.manager.records
    assert all(r.state is JobState.COMPLETED and r.cluster == "good" for r in records.values())
    health = driver.manager.health
    assert health["good"].summary()["availability"] == 1.0
    bad_summary = health["bad"].summary()
    assert bad_summary["availability"] == 0.0 and not bad_summary["online"]
    assert bad_summary["outages"] == 1 and "connection refused" in str(bad_summary["last_error"])
    # backed off: polled far less often than once per cycle, but at least every 2 polls
    assert outcome.cycles / 2 - 1 <= int(str(bad_summary["failures"])) < outcome.cycles


def test_a_hung_poll_is_left_running_and_its_site_skipped() -> None:
    import threading

    fake = FakeTime()
    driver, _, bad = _two_sites(fake, _jobs(2, gap=10.0, runtime=10.0))
    driver.poll_timeout = 0.05
    release = threading.Event()
    calls: list[int] = []

    def hung() -> None:
        calls.append(1)
        release.wait(10)

    bad.refresh = hung  # type: ignore[method-assign]
    bad.observe = lambda: pytest.fail("a site whose poll runs must not be observed")  # type: ignore[method-assign]
    driver.on_cycle = lambda now: release.set() if driver.finished else None
    outcome = driver.run()
    assert outcome.stopped == "done" and len(calls) == 1  # never a second poll meanwhile
    bad_health = driver.manager.health["bad"].summary()
    assert bad_health["outages"] == 1 and bad_health["failures"] == 0  # slow, not failed
    assert all(r.cluster == "good" for r in driver.manager.records.values())


def test_a_site_that_comes_back_is_used_again_within_two_polls() -> None:
    from malleable.errors import ExternalError

    fake = FakeTime()
    driver, _, bad = _two_sites(fake, _jobs(1, gap=1.0, runtime=400.0))
    back_at = [fake.t + 30.0]
    refreshed = bad.refresh

    def flaky() -> None:
        if fake.t < back_at[0]:
            raise ExternalError("slurm poll: Unable to contact slurm controller")
        refreshed()

    bad.refresh = flaky  # type: ignore[method-assign]
    seen: list[float] = []
    driver.on_cycle = lambda now: seen.append(fake.t) if driver.manager.health[
        "bad"].online else None
    driver.run(deadline=40.0)
    assert seen and seen[0] - back_at[0] <= 2 * driver.poll_interval
    assert driver.manager.health["bad"].summary()["downtime_seconds"] >= 29.0


def test_a_job_that_fits_only_on_an_offline_site_waits_instead_of_being_refused() -> None:
    from malleable.errors import ExternalError

    fake = FakeTime()
    big = JobSpec("big", JobKind.RIGID, 8, 8, 8, app="fixed", runtime=10.0)
    driver, _, bad = _two_sites(fake, [big])
    failing = [True]

    def flaky() -> None:
        if failing[0]:
            raise ExternalError("ssh bad: timed out")

    bad.refresh = flaky  # type: ignore[method-assign]
    driver.on_cycle = lambda now: failing.__setitem__(0, now < 50)
    outcome = driver.run(deadline=30.0)
    record = driver.manager.records["big"]
    assert record.state is JobState.COMPLETED and record.cluster == "bad", outcome
