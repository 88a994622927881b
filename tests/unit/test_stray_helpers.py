"""Stray helper allocations are cleaned at every poll, not only the first: bounded
(``HELPER_CANCELS`` scancels at most), confirmed (the entry says ``gone`` once the queue no
longer has it), idempotent, and never a helper of an expansion still in flight."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from malleable import faults
from malleable.adapters.shell import Result
from malleable.adapters.slurm import meta
from malleable.adapters.slurm.cluster import HELPER_CANCELS, SlurmCluster
from malleable.adapters.slurm.ctl import SlurmCtl
from malleable.adapters.slurm.payload import Payload
from malleable.adapters.slurm.resize import Outcome, Resizer
from malleable.clock import ScaledClock
from malleable.model import JobKind, JobSpec, SizeRule
from tests.fakes.slurm import FakeJob, FakeSlurm, node_names

RUN = "r1"


def _site(nodes: int = 8) -> tuple[FakeSlurm, SlurmCluster]:
    fake = FakeSlurm(node_names(nodes))
    clock = ScaledClock(float(fake.now), 1.0, wall=lambda: float(fake.now))
    resizer = Resizer(SlurmCtl(fake), run_tag=RUN, sleep=lambda s: None)
    return fake, SlurmCluster("vu", SlurmCtl(fake), clock, RUN, Payload(0.01),
                              resizer=resizer)


def _running_job(fake: FakeSlurm, cluster: SlurmCluster, size: int = 2) -> FakeJob:
    cluster.start(JobSpec("j1", JobKind.MALLEABLE, 1, 8, size, app="gadget2",
                          size_rule=SizeRule.ANY), size)
    cluster.refresh()
    return next(j for j in fake.jobs.values() if j.name == meta.job_name("j1", RUN))


def _helper(fake: FakeSlurm, parent: int, run: str = RUN) -> FakeJob:
    tag = meta.encode(meta.Tag(run, helper_for=parent))
    job = fake.add_job(1, comment=tag, name="m.helper")
    job.expand_of = parent
    return job


def _scancels(fake: FakeSlurm, job_id: int) -> int:
    return fake.calls.count(["scancel", str(job_id)])


def test_a_helper_whose_job_ended_is_cancelled_at_a_later_poll_and_confirmed_gone() -> None:
    fake, cluster = _site()
    job = _running_job(fake, cluster)
    for _ in range(3):  # polls go by with nothing stray
        cluster.refresh()
    helper = _helper(fake, job.job_id)  # the job ends while its helper is merged
    fake.finish(job.job_id)
    cluster.refresh()  # the fifth poll, not the first
    assert helper.state == "CANCELLED" and _scancels(fake, helper.job_id) == 1
    assert cluster.stray_helpers[helper.job_id]["outcome"] == "cancelling"
    fake.purged.add(helper.job_id)  # Slurm forgets it
    cluster.refresh()
    entry = cluster.stray_helpers[helper.job_id]
    assert entry == {"helper": helper.job_id, "parent": job.job_id, "cancels": 1,
                     "outcome": "gone"}
    cluster.refresh()  # idempotent: nothing more to do
    assert _scancels(fake, helper.job_id) == 1 and len(cluster.stray_helpers) == 1


def test_a_helper_slurm_will_not_cancel_is_cancelled_a_bounded_number_of_times() -> None:
    fake, cluster = _site()
    job = _running_job(fake, cluster)
    helper = _helper(fake, job.job_id)  # no expansion holds it: a stray even if job runs
    dispatch = fake._dispatch

    def deaf(args: list[str], input: str | None) -> Result:
        if args[:1] == ["scancel"]:
            return Result(1, "", "scancel: error: Kill job error: Unspecified error\n")
        return dispatch(args, input)

    fake._dispatch = deaf  # type: ignore[method-assign]
    for _ in range(HELPER_CANCELS + 4):
        cluster.refresh()
    assert _scancels(fake, helper.job_id) == HELPER_CANCELS  # once per poll, then left alone
    assert cluster.stray_helpers[helper.job_id]["outcome"] == "stuck"
    assert job.state == "RUNNING"  # the job itself is never touched


def test_a_completing_ghost_helper_is_reported_once_and_never_cancelled(
        caplog: pytest.LogCaptureFixture) -> None:
    fake, cluster = _site()
    job = _running_job(fake, cluster)
    helper = _helper(fake, job.job_id)
    helper.state, helper.nodes = "COMPLETING", []  # what a failed hand-over leaves
    fake.finish(job.job_id)
    for _ in range(4):
        cluster.refresh()
    assert _scancels(fake, helper.job_id) == 0
    assert cluster.stray_helpers[helper.job_id]["outcome"] == "completing"
    assert sum("scontrol reconfigure" in r.getMessage() for r in caplog.records) == 1
    fake.purged.add(helper.job_id)  # an administrator's reconfigure cleared it
    cluster.refresh()
    assert cluster.stray_helpers[helper.job_id]["outcome"] == "gone"


def test_another_runs_helper_is_not_ours_to_cancel() -> None:
    fake, cluster = _site()
    job = _running_job(fake, cluster)
    other = _helper(fake, job.job_id, run="someone-else")
    fake.finish(job.job_id)
    cluster.refresh()
    assert _scancels(fake, other.job_id) == 0 and cluster.stray_helpers == {}


def test_a_poll_during_an_expansion_leaves_its_helper_alone(
        monkeypatch: pytest.MonkeyPatch) -> None:
    fake, cluster = _site()
    job = _running_job(fake, cluster, size=2)
    cancels_seen: list[int] = []

    def poll_meanwhile(name: str) -> None:  # another thread's poll in the middle of it
        if name in ("helper.granted", "handover.before"):
            cluster.refresh()
            cancels_seen.append(len(_calls(fake, "scancel")))

    monkeypatch.setattr(faults, "reached", poll_meanwhile)
    assert cluster.offer_grow("j1", 2) == 2
    assert cancels_seen == [0, 0]  # both polls saw the helper and left it to its expansion
    assert len(job.nodes) == 4 and cluster.resizes[-1].outcome is Outcome.DONE
    assert cluster.stray_helpers == {}
    monkeypatch.undo()
    cluster.refresh()  # after the expansion: nothing stray either
    assert cluster.stray_helpers == {}


def _calls(fake: FakeSlurm, word: str) -> Sequence[list[str]]:
    return [c for c in fake.calls if c[:1] == [word]]
