"""The real-time driver on a fake clock: arrivals, polling, deadline, signals, prefetch."""

from __future__ import annotations

import itertools
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
    driver.site_timeout = 30.0

    def down() -> ClusterView:
        raise ExternalError("ssh vu: cannot connect")

    cluster.observe = down  # type: ignore[method-assign]
    began = fake.t
    with pytest.raises(ExternalError, match=r"every site has been unavailable for at least "
                                            r"30 s.*cannot connect"):
        driver.run()
    # a duration: not 10 cycles (10 s at this 1-s poll), but the 30 s asked
    assert 30.0 <= fake.t - began <= 30.0 + 2 * driver.poll_interval


def _failing_for_good(fake: FakeTime, seconds_per_poll: float, poll: float) -> float:
    """Seconds of (fake) time until a site whose every poll fails, each taking
    ``seconds_per_poll``, ends a one-site run with a 60-s site timeout."""
    from malleable.errors import ExternalError

    driver, cluster, _ = _driver(fake, _jobs(1, gap=1.0, runtime=5.0), poll=poll)
    driver.site_timeout = 60.0

    def slow_failure() -> None:
        fake.t += seconds_per_poll
        raise ExternalError("ssh vu: Connection timed out")

    cluster.refresh = slow_failure  # type: ignore[method-assign]
    began = fake.t
    with pytest.raises(ExternalError, match="every site"):
        driver.run()
    return fake.t - began


def test_the_budget_is_the_same_duration_for_a_slow_and_a_fast_failure() -> None:
    fast = _failing_for_good(FakeTime(), 0.0, poll=1.0)
    slow = _failing_for_good(FakeTime(), 9.0, poll=1.0)
    rare = _failing_for_good(FakeTime(), 0.0, poll=7.0)
    # 10 failed cycles would have been 10 s, 100 s and 70 s; it is 60 s (+ one cycle) in all
    for elapsed, cycle in ((fast, 1.0), (slow, 10.0), (rare, 7.0)):
        assert 60.0 <= elapsed <= 60.0 + 2 * cycle, (fast, slow, rare)


def test_the_driver_refuses_a_site_timeout_that_is_not_positive() -> None:
    fake = FakeTime()
    clock = ScaledClock(fake.t, 1.0, wall=fake.wall)
    manager = Manager(KoalaPolicy.named("pra", "fpsma"), {})
    with pytest.raises(ValueError, match="site timeout"):
        RealtimeDriver(manager, clock, [], 1.0, site_timeout=0.0)


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


def test_a_site_failing_for_its_timeout_is_given_up_and_the_others_go_on() -> None:
    from malleable.errors import ExternalError

    fake = FakeTime()
    big = JobSpec("big", JobKind.RIGID, 8, 8, 8, app="fixed", runtime=1000.0)
    small = _jobs(4, gap=100.0, runtime=50.0)  # 4 x 2 nodes, 10 real s apart (scale 0.1)
    driver, _, bad = _two_sites(fake, [big, *small])
    driver.site_timeout = 20.0
    calls: list[float] = []
    refreshed = bad.refresh
    broken_at = fake.t + 5.0

    def breaks() -> None:  # answers 5 s, long enough to take the big job, then never again
        calls.append(fake.t)
        if fake.t >= broken_at:
            raise ExternalError("ssh bad: Connection refused")
        refreshed()

    bad.refresh = breaks  # type: ignore[method-assign]
    outcome = driver.run(deadline=200.0)
    assert outcome.stopped == "done"  # ended by its jobs, not by the deadline
    records = driver.manager.records
    assert records["big"].cluster == "bad" and records["big"].state is JobState.FAILED
    assert "site bad was unavailable for" in records["big"].reason
    assert "given up (ssh bad: Connection refused)" in records["big"].reason
    given_up_at = records["big"].end
    assert given_up_at is not None
    # given up 20 s (200 model s) after its first failure, within a cycle and a back-off
    assert 200.0 <= given_up_at - (broken_at - 1000.0) / 0.1 <= 200.0 + 30.0
    assert all(records[j.id].state is JobState.COMPLETED and records[j.id].cluster == "good"
               for j in small)
    health = driver.manager.health["bad"].summary()
    assert health["given_up"] is True and driver.manager.health["good"].online
    # after it was given up, only probed: once every site_probe (20 s) seconds at most
    probes = [t for t in calls if t >= driver.clock.to_epoch(given_up_at)]
    assert all(b - a >= 20.0 for a, b in itertools.pairwise(probes)), probes
    assert len(probes) <= (fake.t - driver.clock.to_epoch(given_up_at)) / 20.0 + 1
    assert [r.spec.id for r in driver.manager.failed] == ["big"]
    view = driver.manager.last_view
    assert view is not None and set(view.clusters) == {"good"}  # its nodes no longer counted


def test_a_job_that_fits_only_on_a_given_up_site_is_refused() -> None:
    from malleable.errors import ExternalError

    fake = FakeTime()
    big = JobSpec("big", JobKind.RIGID, 8, 8, 8, submit_time=50.0, app="fixed", runtime=10.0)
    driver, _, bad = _two_sites(fake, [*_jobs(1, gap=1.0, runtime=300.0), big])
    driver.site_timeout = 10.0

    def down() -> None:
        raise ExternalError("ssh bad: timed out")

    bad.refresh = down  # type: ignore[method-assign]
    outcome = driver.run(deadline=100.0)
    record = driver.manager.records["big"]
    assert outcome.stopped == "done" and record.state is JobState.FAILED
    assert not record.cluster and record.end is not None
    assert "the largest cluster offers 4" in record.reason
    assert record.end < 200.0  # refused once bad was given up, not kept waiting for it


@dataclass
class AbandoningCluster(TimedCluster):
    """A site that lets go of jobs (``abandon``) and cancels them at its next answer."""

    abandoned: set[str] = field(default_factory=set)
    cancelled: list[tuple[str, float]] = field(default_factory=list)

    def abandon(self, job_ids: Sequence[str]) -> None:
        self.abandoned.update(job_ids)

    def close(self) -> None:
        pass

    def refresh(self) -> None:
        self.refreshed += 1
        for job_id in sorted(self.abandoned & set(self.running)):
            del self.running[job_id]
            self.cancelled.append((job_id, self.clock.wall()))


@pytest.mark.parametrize("outage", ["fails", "hangs"])
def test_a_given_up_site_that_answers_again_is_used_again_and_its_old_jobs_cancelled(
        outage: str) -> None:
    """Down from 5 s to 55 s (its polls fail at once, or one poll hangs until it is back),
    given up at 25 s: probed, and the first answer cancels big there and brings it back."""
    import threading

    from malleable.errors import ExternalError

    fake = FakeTime()
    clock = ScaledClock(fake.t, 0.1, wall=fake.wall)
    good, bad = TimedCluster("good", 4, clock), AbandoningCluster("bad", 8, clock)
    big = JobSpec("big", JobKind.RIGID, 8, 8, 8, app="fixed", runtime=10000.0)
    late = JobSpec("late", JobKind.RIGID, 8, 8, 8, submit_time=900.0, app="fixed",
                   runtime=50.0)
    manager = Manager(KoalaPolicy.named("pra", "fpsma"), {"good": good, "bad": bad})
    driver = RealtimeDriver(manager, clock, [big, late], 1.0, monotonic=fake.monotonic,
                            pause=fake.pause, site_timeout=20.0, poll_timeout=0.02)
    broken = (fake.t + 5.0, fake.t + 55.0)
    calls: list[float] = []
    up, answered = threading.Event(), threading.Event()

    def flaky() -> None:
        calls.append(fake.t)
        if broken[0] <= fake.t < broken[1]:
            if outage == "fails":
                raise ExternalError("ssh bad: Connection refused")
            up.wait(30)  # hangs until the controller is back, then answers
            AbandoningCluster.refresh(bad)
            answered.set()
            return
        AbandoningCluster.refresh(bad)

    def back_up(now: float) -> None:
        if fake.t >= broken[1] and not up.is_set():
            up.set()  # the hung poll answers now, on the fake clock's present second
            assert outage == "fails" or answered.wait(10)

    bad.refresh = flaky  # type: ignore[method-assign]
    driver.on_cycle = back_up
    outcome = driver.run(deadline=300.0)
    assert outcome.stopped == "done"
    records = manager.records
    assert records["big"].state is JobState.FAILED and "given up" in records["big"].reason
    given_up = clock.to_epoch(records["big"].end or 0.0)
    assert broken[0] + 20.0 <= given_up <= broken[0] + 20.0 + 3.0
    assert len(bad.cancelled) == 1 and bad.cancelled[0][0] == "big"
    back = bad.cancelled[0][1]  # the first poll that answered after the give-up
    if outage == "fails":  # probed every 20 s while given up, never more often
        probes = [t for t in calls if given_up < t <= back]
        assert len(probes) >= 2, calls
        assert all(b - a >= 20.0 for a, b in itertools.pairwise(probes)), probes
        assert broken[1] <= back <= broken[1] + 20.0 + 2.0
    else:  # the poll that hung is the probe: it answers once the site is back
        assert len([t for t in calls if broken[0] <= t < broken[1]]) == 1, calls
        assert broken[1] <= back <= broken[1] + 2.0
    # used again: the 8-node job that fits only there ran there
    assert records["late"].state is JobState.COMPLETED and records["late"].cluster == "bad"
    health = manager.health["bad"].summary()
    assert health["given_up"] is False and health["returns"] == 1 and health["online"]
    assert [r.spec.id for r in manager.failed] == ["big"]
    # the cycles it was given up count as cycles it was missed
    assert health["cycles"] == outcome.cycles and health["offline_cycles"] >= 45, health


def test_the_manager_ignores_events_of_a_job_it_recorded_failed_when_its_site_was_given_up(
        ) -> None:
    fake = FakeTime()
    driver, _, _ = _two_sites(fake, [JobSpec("big", JobKind.RIGID, 8, 8, 8, app="fixed",
                                             runtime=1000.0)])
    manager = driver.manager
    manager.submit(driver.jobs[0])
    manager.cycle(0.0)
    assert manager.records["big"].cluster == "bad"
    lost = manager.give_up_site("bad", 10.0)
    assert lost == ["big"] and manager.records["big"].state is JobState.FAILED
    # a poll still running when the site was given up reports the job later: ignored
    manager.on_event(JobEvent(20.0, "big", JobState.RUNNING, 8))
    manager.on_event(JobEvent(30.0, "big", JobState.COMPLETED, 0))
    manager.on_event(JobEvent(30.0, "big", JobState.WAITING, 0, "given back"))
    record = manager.records["big"]
    assert record.state is JobState.FAILED and record.end == 10.0
    assert "big" not in manager.waiting_ids() and manager.unfinished == 0


def test_a_hung_poll_is_waited_for_once_not_in_every_cycle_of_its_outage(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import threading
    from concurrent.futures import wait as real_wait

    import malleable.realtime as realtime

    fake = FakeTime()
    driver, _, bad = _two_sites(fake, _jobs(3, gap=10.0, runtime=10.0))
    driver.poll_timeout = 0.05
    release = threading.Event()
    hung: list[object] = []
    waited: list[int] = []  # per cycle: how many of the waited-for polls are the hung one

    def hang() -> None:
        release.wait(10)

    def recording_wait(futures: list[object], timeout: float | None = None) -> object:
        if not hung and driver._polls.get("bad") is not None:
            hung.append(driver._polls["bad"])
        waited.append(sum(f is hung[0] for f in futures) if hung else 0)
        return real_wait(futures, timeout=timeout)  # type: ignore[arg-type]

    monkeypatch.setattr(realtime, "wait", recording_wait)
    bad.refresh = hang  # type: ignore[method-assign]
    driver.on_cycle = lambda now: release.set() if driver.finished else None
    outcome = driver.run()
    assert outcome.stopped == "done" and outcome.cycles >= 3
    assert waited[0] == 1 and sum(waited) == 1  # the cycle that began it, and no other
    assert driver.manager.health["bad"].summary()["outages"] == 1
    assert all(r.cluster == "good" for r in driver.manager.records.values())
