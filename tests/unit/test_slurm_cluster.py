"""SlurmCluster and Resizer on a fake site that answers in Slurm 22.05's formats."""

from __future__ import annotations

import pytest

from malleable.adapters.slurm import meta
from malleable.adapters.slurm.cluster import SlurmCluster
from malleable.adapters.slurm.ctl import Poll, SlurmCtl
from malleable.adapters.slurm.payload import Payload
from malleable.adapters.slurm.resize import Outcome, ResizeError, Resizer
from malleable.clock import ScaledClock
from malleable.manager import Manager
from malleable.model import JobKind, JobSpec, JobState, SizeRule
from malleable.policies.koala import KoalaPolicy
from malleable.resources import JobEvent, ResourceManager
from malleable.store import Store
from tests.fakes.slurm import FakeSlurm, node_names


def _spec(job_id: str = "j1", low: int = 2, high: int = 8, init: int = 2,
          rule: SizeRule = SizeRule.ANY, kind: JobKind = JobKind.MALLEABLE) -> JobSpec:
    return JobSpec(job_id, kind, low, high, init, app="gadget2", size_rule=rule)


def _site(nodes: int = 8, run: str = "r1",
          **kw: object) -> tuple[FakeSlurm, SlurmCluster]:
    fake = FakeSlurm(node_names(nodes))
    clock = ScaledClock(float(fake.now), 1.0, wall=lambda: float(fake.now))
    resizer = Resizer(SlurmCtl(fake), run_tag=run, sleep=lambda s: None)
    cluster = SlurmCluster("vu", SlurmCtl(fake), clock, run, Payload(0.01), resizer=resizer,
                           **kw)  # type: ignore[arg-type]
    return fake, cluster


def test_is_a_resource_manager() -> None:
    _, cluster = _site()
    assert isinstance(cluster, ResourceManager)


def test_start_submits_a_tagged_payload_and_reports_slurm_start() -> None:
    fake, cluster = _site()
    fake.now += 5
    assert cluster.start(_spec(), 2) == 2
    sbatch = next(c for c in fake.calls if c[0] == "sbatch")
    assert "--nodes=2" in sbatch and "--exclusive" in sbatch and "--parsable" in sbatch
    job = fake.jobs[cluster.slurm_id("j1") or 0]
    assert meta.decode(job.comment) == meta.Tag("r1", job="j1")
    assert "#!/usr/bin/env python3" in fake.scripts[job.job_id]
    fake.now += 3
    events = cluster.drain_events()
    assert events == [JobEvent(5.5, "j1", JobState.RUNNING, 2)]  # Slurm's second, clamped
    view = cluster.observe()
    assert (view.nodes, view.idle) == (8, 6)
    assert view.running["j1"].managed and view.running["j1"].size == 2


def test_pending_jobs_claim_their_nodes_and_background_is_unmanaged() -> None:
    fake, cluster = _site(nodes=4)
    fake.add_job(3, name="local-user")
    assert cluster.start(_spec(), 2) == 2  # pending: only 1 node free
    view = cluster.observe()
    assert view.idle == 0 and view.pending == 1
    (background,) = view.running.values()
    assert not background.managed and background.size == 3 and view.background == 3
    assert cluster.drain_events() == []


def test_nodes_read_idle_before_a_job_started_are_not_offered() -> None:
    """The poll reads the nodes, then the jobs: a job that starts between the two reads
    shows RUNNING while its nodes still read IDLE (seen on Slurm 24.11 over REST: the
    grows offered into them were refused, "nodes busy"). Those nodes are not idle."""
    _, cluster = _site(nodes=4)
    nodes_first = cluster.ctl.poll().nodes  # every node idle
    assert cluster.start(_spec(), 2) == 2  # starts at once on vu-n001/2
    raced = Poll(cluster.ctl.poll().jobs, nodes_first)
    cluster.ctl.poll = lambda: raced  # type: ignore[method-assign]
    view = cluster.observe()
    assert view.running["j1"].size == 2
    assert (view.nodes, view.idle) == (4, 2)


def test_grow_goes_through_a_helper_allocation_and_is_read_back() -> None:
    fake, cluster = _site()
    cluster.start(_spec(), 2)
    cluster.drain_events()
    assert cluster.offer_grow("j1", 3) == 3
    result = cluster.resizes[-1]
    assert (result.before, result.after, result.outcome) == (2, 5, Outcome.DONE)
    assert result.helper is not None and fake.jobs[result.helper].state == "COMPLETED"
    sequence = [c[:3] if c[0] != "sh" else c[3:] for c in fake.calls
                if c[0] in ("salloc", "scontrol", "scancel") or c[3:4] == ["handover"]]
    handover = ["handover", str(result.job_id), str(result.helper)]  # checked and given at once
    assert sequence.index(handover) < sequence.index(["scancel", str(result.helper)])
    assert ["scontrol", "update", f"JobId={result.job_id}"] in sequence  # NumNodes=ALL
    salloc = next(c for c in fake.calls if c[0] == "salloc")
    assert f"--dependency=expand:{result.job_id}" in salloc and "--no-shell" in salloc
    assert cluster.drain_events()[-1] == JobEvent(0.0, "j1", JobState.RUNNING, 5)
    assert cluster.observe().running["j1"].size == 5


def test_grow_respects_the_size_rule() -> None:
    _fake, cluster = _site()
    cluster.start(_spec(rule=SizeRule.POW2), 2)
    cluster.drain_events()
    assert cluster.offer_grow("j1", 5) == 2  # 2 + 5 = 7 -> takes 4
    assert cluster.resizes[-1].after == 4


def test_refused_expansion_is_reported_not_assumed() -> None:
    fake, cluster = _site(nodes=4)
    cluster.start(_spec(), 2)
    fake.add_job(2)
    cluster.drain_events()
    assert cluster.offer_grow("j1", 2) == 0
    result = cluster.resizes[-1]
    assert result.outcome is Outcome.REFUSED and result.after == 2
    assert "Unable to allocate resources" in result.reason
    assert result.reason.endswith("(Slurm's reason: Resources)")  # the cancelled helper's
    assert cluster.drain_events() == []
    pending_helper = str(fake._next)  # the id salloc printed while pending: cancelled
    assert ["scancel", pending_helper] in fake.calls


def test_refused_with_idle_nodes_names_select_linears_bug(caplog: pytest.LogCaptureFixture
                                                          ) -> None:
    fake, cluster = _site(nodes=4)
    cluster.start(_spec(), 2)
    cluster.drain_events()
    fake.stuck = set(fake.free())  # idle in sinfo, never given by the scheduler
    assert cluster.offer_grow("j1", 2) == 0
    reason = cluster.resizes[-1].reason
    assert "(Slurm's reason: Resources); yet sinfo shows 2 idle node(s) (" in reason
    assert "scontrol reconfigure" in reason and "docs/slurm.md" in reason
    assert any("select/linear" in r.getMessage() for r in caplog.records
               if r.levelname == "WARNING")


def test_refused_for_busy_nodes_does_not_name_the_bug() -> None:
    fake, cluster = _site(nodes=4)
    cluster.start(_spec(), 2)
    fake.add_job(1)
    fake.stuck = set(fake.free())  # 1 idle node left: too few for a grow by 2 anyway
    cluster.drain_events()
    assert cluster.offer_grow("j1", 2) == 0
    assert cluster.resizes[-1].reason.endswith("(Slurm's reason: Resources)")


def test_shrink_and_a_refused_second_shrink() -> None:
    fake, cluster = _site()
    cluster.start(_spec(init=6), 6)
    cluster.drain_events()
    assert cluster.request_shrink("j1", 2, mandatory=True) == 2
    fake.refuse["3"] = "slurm_update error: DB index is being set"
    assert cluster.request_shrink("j1", 1, mandatory=False) == 0
    refused = cluster.resizes[-1]
    assert refused.outcome is Outcome.REFUSED and "DB index" in refused.reason
    assert [e.size for e in cluster.drain_events()] == [4]
    assert cluster.request_shrink("j1", 9, mandatory=True) == 2  # never below the minimum


def test_rigid_and_unknown_jobs_are_not_resized() -> None:
    fake, cluster = _site()
    cluster.start(_spec(kind=JobKind.RIGID, low=2, high=2), 2)
    cluster.drain_events()
    assert cluster.offer_grow("j1", 2) == 0 and cluster.request_shrink("j1", 1, True) == 0
    assert cluster.offer_grow("nope", 2) == 0
    assert not any(c[0] == "salloc" for c in fake.calls)


def test_ends_with_slurm_state_and_time() -> None:
    fake, cluster = _site()
    cluster.start(_spec("a"), 2)
    cluster.start(_spec("b"), 2)
    cluster.drain_events()
    fake.now += 10
    fake.finish(cluster.slurm_id("a") or 0)
    cluster.cancel("b")
    fake.now += 2
    events = {e.job_id: e for e in cluster.drain_events()}
    assert events["a"] == JobEvent(10.5, "a", JobState.COMPLETED, 0, "")
    assert events["b"].state is JobState.CANCELLED and events["b"].time == 10.5
    assert cluster.drain_events() == []  # reported once


def test_jobs_gone_from_the_queue_end_from_accounting_or_fail() -> None:
    fake, cluster = _site()
    cluster.start(_spec("a"), 2)
    cluster.start(_spec("b"), 2)
    fake.now += 4
    for name in ("a", "b"):
        fake.finish(cluster.slurm_id(name) or 0)
        fake.purged.add(cluster.slurm_id(name) or 0)
    fake.accounting = True
    fake.jobs[cluster.slurm_id("b") or 0].state = "RESIZING"  # not finished in sacct
    events = cluster.drain_events()
    assert [(e.job_id, e.state) for e in events] == [("a", JobState.RUNNING),
                                                     ("a", JobState.COMPLETED)]
    fake.accounting = False
    events = cluster.refresh() or cluster.drain_events()
    assert [(e.job_id, e.state) for e in events] == [("b", JobState.FAILED)]
    assert "neither in the queue nor in accounting" in events[0].reason


def test_a_resize_from_outside_is_noticed() -> None:
    fake, cluster = _site()
    cluster.start(_spec(init=4), 4)
    cluster.drain_events()
    fake.now += 1
    Resizer(SlurmCtl(fake)).shrink(cluster.slurm_id("j1") or 0, 3)
    assert cluster.drain_events() == [JobEvent(1.0, "j1", JobState.RUNNING, 3)]


def test_restart_binds_jobs_by_tag_and_cancels_stray_helpers() -> None:
    fake, before = _site()
    before.start(_spec("a"), 2)
    slurm_a = before.slurm_id("a")
    stray = fake.add_job(1, comment=meta.encode(meta.Tag("r1", helper_for=slurm_a)),
                         name="m.helper")
    other_run = fake.add_job(1, comment=meta.encode(meta.Tag("other", job="a")))
    _fake2, after = _site(run="r1")
    after.ctl = before.ctl
    after.resizer = before.resizer
    after.adopt(_spec("a"), None, started=True, size=2)
    assert after.drain_events() == []
    assert after.slurm_id("a") == slurm_a
    assert fake.jobs[stray.job_id].state == "CANCELLED"
    assert fake.jobs[other_run.job_id].state == "RUNNING"
    view = after.observe()
    assert view.running["a"].managed
    assert not view.running[f"slurm:vu:{other_run.job_id}"].managed


def test_resizer_refuses_jobs_that_are_not_running() -> None:
    fake, _cluster = _site(nodes=2)
    fake.add_job(2)
    waiting = fake.add_job(2)
    resizer = Resizer(SlurmCtl(fake))
    with pytest.raises(ResizeError, match="not RUNNING"):
        resizer.resize(waiting.job_id, 1)
    with pytest.raises(ResizeError, match="not known"):
        resizer.resize(999, 1)
    running = min(fake.jobs)
    assert resizer.resize(running, 2).reason == "already there"
    assert resizer.shrink(running, 0).outcome is Outcome.REFUSED


def test_expansion_waits_after_a_shrink_of_the_same_job() -> None:
    fake = FakeSlurm(node_names(8))
    now = [0.0]
    slept: list[float] = []

    def sleep(seconds: float) -> None:
        slept.append(seconds)
        now[0] += seconds

    resizer = Resizer(SlurmCtl(fake), clock=lambda: now[0], sleep=sleep, rejoin_gap=1.2)
    job = fake.add_job(4)
    assert resizer.shrink(job.job_id, 2).outcome is Outcome.DONE
    now[0] += 0.2
    assert resizer.expand(job.job_id, 4).outcome is Outcome.DONE
    assert slept and slept[0] == pytest.approx(1.0)


def test_the_shrink_marks_hold_only_jobs_within_the_rejoin_gap() -> None:
    # A service shrinks thousands of jobs: one mark each used to be kept for ever.
    fake = FakeSlurm(node_names(40))
    now = [0.0]
    resizer = Resizer(SlurmCtl(fake), clock=lambda: now[0], sleep=lambda s: None,
                      rejoin_gap=1.2)
    jobs = [fake.add_job(2) for _ in range(20)]
    for job in jobs:
        now[0] += 2.0
        assert resizer.shrink(job.job_id, 1).outcome is Outcome.DONE
    assert set(resizer._last_shrink) == {jobs[-1].job_id}
    other = fake.add_job(2)
    now[0] += 1.0  # within the gap of the last shrink: both marks are needed
    assert resizer.shrink(other.job_id, 1).outcome is Outcome.DONE
    assert set(resizer._last_shrink) == {jobs[-1].job_id, other.job_id}


def test_manager_on_two_fake_sites_with_a_journal() -> None:
    fake_a, site_a = _site(nodes=4)
    fake_b, site_b = _site(nodes=8)
    site_b.name = "uva"
    store = Store.open(":memory:")
    site_a.journal = site_b.journal = store
    manager = Manager(KoalaPolicy.named("pra", "fpsma"), {"vu": site_a, "uva": site_b},
                      journal=store)
    for i in range(3):
        manager.submit(_spec(f"j{i}", high=8))
    manager.cycle(0.0)
    manager.cycle(1.0)  # the started jobs grow into the idle nodes
    grown = [op for op in manager.operations if op.kind == "grow"]
    assert grown and store.resize_outcomes().get("done", 0) == len(grown)
    for fake in (fake_a, fake_b):
        for job in list(fake.jobs.values()):
            if job.state == "RUNNING" and job.name != "m.helper":
                fake.finish(job.job_id)
    manager.cycle(2.0)
    assert manager.unfinished == 0
    assert all(r.state is JobState.COMPLETED for r in manager.records.values())
    assert set(store.slurm_ids()) == {(manager.cluster_of(f"j{i}"), f"j{i}") for i in range(3)}
    assert {manager.cluster_of(f"j{i}") for i in range(3)} == {"vu", "uva"}


def test_expansion_of_a_job_that_ends_meanwhile_cancels_the_helper() -> None:
    fake = FakeSlurm(node_names(4))
    job = fake.add_job(2)
    ctl = SlurmCtl(fake)
    allocate = ctl.allocate

    def allocate_then_end(*args: object, **kw: object) -> object:
        granted = allocate(*args, **kw)  # type: ignore[arg-type]
        fake.finish(job.job_id)  # the job ends while its helper is being granted
        return granted

    ctl.allocate = allocate_then_end  # type: ignore[method-assign]
    result = Resizer(ctl, sleep=lambda s: None).expand(job.job_id, 4)
    assert result.outcome is Outcome.REFUSED and "ended during the expansion" in result.reason
    assert result.helper is not None and fake.jobs[result.helper].state == "CANCELLED"
    assert not any(c[:3] == ["scontrol", "update", f"JobId={result.helper}"] for c in fake.calls)


def test_events_come_oldest_first_across_jobs_and_batches() -> None:
    """Slurm dates an end in whole seconds, a resize when it is confirmed: one batch is
    sorted, and an end dated before an event already handed out is dated at that event."""
    fake, cluster = _site(nodes=8)
    cluster.start(_spec("a", init=2), 2)
    cluster.start(_spec("b", init=2), 2)
    cluster.start(_spec("c", init=2), 2)
    cluster.drain_events()
    fake.now += 10
    assert cluster.offer_grow("a", 1) == 1  # dated now (10)
    fake.finish(cluster.slurm_id("b") or 0)
    fake.jobs[cluster.slurm_id("b") or 0].end = 5  # Slurm says b ended before the grow
    cluster.invalidate()
    batch = cluster.drain_events()
    assert [(e.job_id, e.state) for e in batch] == [("b", JobState.COMPLETED),
                                                   ("a", JobState.RUNNING)]
    assert [e.time for e in batch] == sorted(e.time for e in batch)
    fake.finish(cluster.slurm_id("c") or 0)
    fake.jobs[cluster.slurm_id("c") or 0].end = 3  # older than everything handed out
    cluster.invalidate()
    (late,) = cluster.drain_events()
    assert late.job_id == "c" and late.time == batch[-1].time


def test_a_job_that_ends_during_the_hand_over_is_never_reported_done() -> None:
    """Seen on the testbed: the job cancelled while its helper's nodes were handed over;
    ``NumNodes=ALL`` fails ("Job has already finished") but scontrol still lists the
    nodes: the expansion is refused, not done."""
    fake = FakeSlurm(node_names(4))
    job = fake.add_job(2)
    ctl = SlurmCtl(fake)
    update = ctl.update_nodes

    def update_then_end(job_id: int, nodes: str) -> object:
        result = update(job_id, nodes)
        if nodes == "ALL":
            fake.finish(job.job_id, "CANCELLED")
        return result

    ctl.update_nodes = update_then_end  # type: ignore[method-assign,assignment]
    result = Resizer(ctl, sleep=lambda s: None).expand(job.job_id, 4)
    assert result.outcome is Outcome.REFUSED and result.after == 2 and result.changed == 0
    assert result.reason.startswith("the job is CANCELLED")


def test_stray_helpers_are_cancelled_on_every_poll_and_a_completing_one_reported_once(
        caplog: pytest.LogCaptureFixture) -> None:
    fake, cluster = _site()
    cluster.start(_spec("a"), 2)
    cluster.drain_events()
    slurm_a = cluster.slurm_id("a")
    stray = fake.add_job(1, comment=meta.encode(meta.Tag("r1", helper_for=slurm_a)),
                         name="m.helper")
    cluster.invalidate()
    cluster.drain_events()  # a later poll, not the first
    assert fake.jobs[stray.job_id].state == "CANCELLED"
    stuck = fake.add_job(0, comment=meta.encode(meta.Tag("r1", helper_for=slurm_a)),
                         name="m.helper")
    stuck.state = "COMPLETING"
    for _ in range(3):
        cluster.invalidate()
        cluster.drain_events()
    assert ["scancel", str(stuck.job_id)] not in fake.calls
    assert sum(f"helper allocation {stuck.job_id}" in r.message for r in caplog.records) == 1


@pytest.mark.parametrize(("level", "allowed"), [("None", False), ("Operator", True),
                                                ("Administrator", True)])
def test_another_users_job_is_resized_only_by_an_operator(level: str, allowed: bool) -> None:
    """Checked before any helper is allocated: Slurm refuses another user's shrink, but a
    helper's nodes would be handed to that user's job."""
    fake = FakeSlurm(node_names(4))
    fake.admin_levels["malleable"] = level
    job = fake.add_job(2)
    job.user = "alice"
    resizer = Resizer(SlurmCtl(fake, user="malleable"), sleep=lambda s: None)
    if allowed:
        assert resizer.resize(job.job_id, 3).outcome is Outcome.DONE
        return
    with pytest.raises(ResizeError, match="belongs to alice; malleable may not resize it"):
        resizer.resize(job.job_id, 3)
    assert not any(c[0] == "salloc" for c in fake.calls)
    mine = fake.add_job(1)  # one's own job needs no level, and the level is asked once
    resizer.resize(mine.job_id, 2)
    assert sum(c[0] == "sacctmgr" for c in fake.calls) == 1


def test_extra_copies_of_this_runs_jobs_are_cancelled_on_every_poll() -> None:
    """A crash between sbatch and the journal made a restart submit a job again: the copy
    the run does not follow would run unseen as background load."""
    fake, cluster = _site()
    cluster.start(_spec("a"), 2)
    cluster.drain_events()
    copy = fake.add_job(2, comment=meta.encode(meta.Tag("r1", job="a")), name="m.a")
    lost = fake.add_job(1, comment=meta.encode(meta.Tag("r1", job="z")), name="m.z")
    other = fake.add_job(1, comment=meta.encode(meta.Tag("other", job="z")), name="m.z")
    cluster.invalidate()
    cluster.drain_events()
    assert fake.jobs[copy.job_id].state == "CANCELLED"
    assert fake.jobs[lost.job_id].state == "CANCELLED"
    assert fake.jobs[other.job_id].state == "RUNNING"  # another run's: not ours to cancel
    assert fake.jobs[cluster.slurm_id("a") or 0].state == "RUNNING"


def test_an_abandoned_job_is_cancelled_at_the_next_poll_and_reported_no_more(
        caplog: pytest.LogCaptureFixture) -> None:
    """The manager recorded the job failed when it gave the site up; once the site
    answers again, the copy it still runs is cancelled (else it runs unseen as load)."""
    fake, cluster = _site()
    cluster.start(_spec("a"), 2)
    cluster.start(_spec("b"), 2)
    cluster.drain_events()
    slurm_a = cluster.slurm_id("a") or 0
    cluster.abandon(["a"])
    assert cluster.size_of("a") is None and cluster.offer_grow("a", 2) == 0
    with caplog.at_level("WARNING"):
        cluster.refresh()
    assert fake.jobs[slurm_a].state == "CANCELLED"
    assert "recorded it failed when it gave the site up" in caplog.text
    assert fake.jobs[cluster.slurm_id("b") or 0].state == "RUNNING"
    fake.now += 5
    cluster.invalidate()
    assert [e.job_id for e in cluster.drain_events()] == []  # a's end is not reported
    view = cluster.observe()
    assert "a" not in view.running and view.running["b"].managed
