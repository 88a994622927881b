"""Durable intents: the manager killed at each journal boundary, then restarted.

A kill is stood in for by an exception raised where ``faults.reached`` would SIGKILL the
process: the journal (autocommit SQLite) is left exactly as a kill leaves it, the fake
Slurm site keeps what it was told. The restart is a new manager and a new adapter over
the same journal and site (the real kill -9 runs in tests/integration/test_kill_points.py).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from malleable import faults
from malleable.adapters.slurm import meta
from malleable.adapters.slurm.cluster import SlurmCluster
from malleable.adapters.slurm.ctl import SlurmCtl
from malleable.adapters.slurm.payload import Payload
from malleable.adapters.slurm.resize import Resizer
from malleable.clock import ScaledClock
from malleable.manager import Manager
from malleable.model import JobKind, JobSpec, JobState, SizeRule
from malleable.policies.hierarchical.factories import acds
from malleable.policies.koala import KoalaPolicy
from malleable.resources import JobEvent
from malleable.store import Store, resume
from tests.fakes.slurm import FakeSlurm, node_names

RUN = "r1"


class Killed(BaseException):
    """Where the real hook would SIGKILL the manager."""


def _kill_at(monkeypatch: pytest.MonkeyPatch, boundary: str, nth: int = 1) -> list[str]:
    seen: list[str] = []

    def reached(name: str) -> None:
        seen.append(name)
        if name == boundary and seen.count(name) == nth:
            raise Killed(name)

    monkeypatch.setattr(faults, "reached", reached)
    return seen


def _spec(i: int) -> JobSpec:
    return JobSpec(f"j{i}", JobKind.MALLEABLE, 2, 8, 2, app="gadget2", size_rule=SizeRule.ANY)


def _site(fake: FakeSlurm, store: Store) -> SlurmCluster:
    clock = ScaledClock(float(fake.now) - 100, 1.0, wall=lambda: float(fake.now))
    resizer = Resizer(SlurmCtl(fake), run_tag=RUN, sleep=lambda s: None)
    return SlurmCluster("vu", SlurmCtl(fake), clock, RUN, Payload(0.01), resizer=resizer,
                        journal=store)


def _manager(fake: FakeSlurm, store: Store, policy: str = "pra") -> Manager:
    return Manager(KoalaPolicy.named(policy, "fpsma"), {"vu": _site(fake, store)},
                   journal=store, max_retries=1)


def _cycles(manager: Manager, fake: FakeSlurm, start: int, count: int) -> None:
    for step in range(start, start + count):
        fake.now += 1
        manager.cycle(float(step))


def _finish_all(manager: Manager, fake: FakeSlurm, start: int) -> None:
    """Let every running job end, cycling until the manager has nothing left."""
    for step in range(start, start + 40):
        for job in list(fake.jobs.values()):
            if job.state == "RUNNING" and not job.name.startswith("m.helper"):
                fake.finish(job.job_id)
        fake.now += 1
        manager.cycle(float(step))
        if manager.unfinished == 0:
            return


def _copies(fake: FakeSlurm, job_id: str) -> list[int]:
    """Slurm jobs ever submitted for ``job_id`` in this run (what sacct --name shows)."""
    return [j.job_id for j in fake.jobs.values() if j.name == meta.job_name(job_id, RUN)]


def _check_nothing_lost_or_doubled(fake: FakeSlurm, manager: Manager, jobs: int) -> None:
    for i in range(jobs):
        record = manager.records[f"j{i}"]
        assert record.state is JobState.COMPLETED, (record.spec.id, record.state, record.reason)
        assert len(_copies(fake, f"j{i}")) == 1, (f"j{i}", _copies(fake, f"j{i}"))
    left = [j for j in fake.jobs.values() if j.state in ("RUNNING", "PENDING")]
    assert left == [], "jobs or helpers left in the queue"


@pytest.mark.parametrize("boundary,nth", [
    ("submit.before", 1), ("submit.after", 1), ("submit.done", 1), ("submit.after", 2),
    ("helper.granted", 1), ("handover.before", 1), ("handover.given", 1),
    ("handover.after", 1),
])
def test_killed_at_a_boundary_then_restarted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                             boundary: str, nth: int) -> None:
    fake = FakeSlurm(node_names(8))
    store = Store.open(tmp_path / "state.sqlite")
    seen = _kill_at(monkeypatch, boundary, nth)
    before = _manager(fake, store)
    for i in range(3):
        before.submit(_spec(i))
    with pytest.raises(Killed):
        _cycles(before, fake, 0, 5)
    assert seen.count(boundary) == nth
    monkeypatch.setattr(faults, "reached", lambda name: None)
    store.close()

    store = Store.open(tmp_path / "state.sqlite")
    after = _manager(fake, store)
    resume(store, after, after.clusters)
    _finish_all(after, fake, 10)
    _check_nothing_lost_or_doubled(fake, after, 3)
    assert store.intents("open") == []
    closed = [i.state for i in store.intents(None) if i.kind == "submit"]
    expected = {"submit.before": "rolled back", "submit.after": "adopted"}.get(boundary)
    if expected is not None:  # submit.done: the id was journaled, the intent closed
        assert closed.count(expected) == 1, closed


def test_handover_finished_after_a_restart_takes_the_nodes_up(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeSlurm(node_names(8))
    store = Store.open(tmp_path / "state.sqlite")
    _kill_at(monkeypatch, "handover.given")
    before = _manager(fake, store)
    before.submit(_spec(0))
    with pytest.raises(Killed):
        _cycles(before, fake, 0, 5)
    monkeypatch.setattr(faults, "reached", lambda name: None)
    slurm_id = store.slurm_ids()[("vu", "j0")]
    assert fake.jobs[slurm_id].given  # handed over, not taken up: the kill came between

    again = Store.open(tmp_path / "state.sqlite")
    after = _manager(fake, again)
    resume(again, after, after.clusters)
    _cycles(after, fake, 10, 2)  # the first poll finishes the hand-over, the next sees it
    assert fake.jobs[slurm_id].given == [] and len(fake.jobs[slurm_id].nodes) == 8
    assert ["scontrol", "update", f"JobId={slurm_id}", "NumNodes=ALL"] in fake.calls
    assert after.records["j0"].sizes[-1][1] == 8  # the size Slurm shows, read back


def test_a_cancel_cut_short_is_carried_out_after_the_restart(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeSlurm(node_names(8))
    store = Store.open(tmp_path / "state.sqlite")
    before = _manager(fake, store)
    before.submit(_spec(0))
    _cycles(before, fake, 0, 2)
    slurm_id = store.slurm_ids()[("vu", "j0")]
    _kill_at(monkeypatch, "cancel.before")
    with pytest.raises(Killed):
        before.clusters["vu"].cancel("j0")
    monkeypatch.setattr(faults, "reached", lambda name: None)
    assert fake.jobs[slurm_id].state == "RUNNING"

    again = Store.open(tmp_path / "state.sqlite")
    after = _manager(fake, again)
    resume(again, after, after.clusters)
    _cycles(after, fake, 10, 2)
    assert fake.jobs[slurm_id].state == "CANCELLED"
    assert after.records["j0"].state is JobState.CANCELLED


def test_two_copies_in_slurm_the_running_one_is_adopted(tmp_path: Path) -> None:
    fake = FakeSlurm(node_names(2))
    store = Store.open(tmp_path / "state.sqlite")
    store.job_submitted(_spec(0))
    store.intent("submit", "vu", "j0", 2, time=1.0)  # sbatch ran twice, neither journaled
    tag = meta.encode(meta.Tag(RUN, job="j0"))
    # The older copy stays pending (the fake schedules any job that fits: it asks more).
    pending = fake.add_job(3, comment=tag, name=meta.job_name("j0", RUN))
    running = fake.add_job(2, comment=tag, name=meta.job_name("j0", RUN))
    assert (fake.jobs[running.job_id].state, fake.jobs[pending.job_id].state) == (
        "RUNNING", "PENDING")
    manager = _manager(fake, store)
    found = resume(store, manager, manager.clusters)
    assert found.adopted_submissions == 1
    _cycles(manager, fake, 10, 1)
    assert store.slurm_ids()[("vu", "j0")] == running.job_id
    assert fake.jobs[pending.job_id].state == "CANCELLED"
    assert not any(c[0] == "sbatch" for c in fake.calls)


def test_a_node_failure_submits_the_job_again_within_its_retries(tmp_path: Path) -> None:
    fake = FakeSlurm(node_names(8))
    store = Store.open(tmp_path / "state.sqlite")
    manager = _manager(fake, store)  # max_retries=1
    manager.submit(_spec(0))
    _cycles(manager, fake, 0, 2)
    fake.finish(store.slurm_ids()[("vu", "j0")], "NODE_FAIL")
    _cycles(manager, fake, 2, 2)
    assert manager.retries == {"j0": 1}
    assert len(_copies(fake, "j0")) == 2
    assert [op.kind for op in manager.operations].count("retry") == 1
    fake.finish(store.slurm_ids()[("vu", "j0")], "NODE_FAIL")
    _cycles(manager, fake, 4, 2)
    record = manager.records["j0"]
    assert record.state is JobState.FAILED and "NODE_FAIL" in record.reason
    assert manager.failed == [record]
    assert len(_copies(fake, "j0")) == 2  # retries are bounded


def test_a_failure_of_the_job_itself_is_not_retried() -> None:
    manager = Manager(KoalaPolicy.named("pra", "fpsma"), {}, max_retries=3)
    manager.submit(_spec(0))
    manager.on_event(JobEvent(1.0, "j0", JobState.FAILED, 0, "FAILED NonZeroExitCode"))
    assert manager.records["j0"].state is JobState.FAILED and manager.retries == {}


def test_policy_memory_and_tries_survive_a_restart(tmp_path: Path) -> None:
    policy = acds(quantum=10.0, levels=["site"])
    manager = Manager(policy, {}, max_tries=5)
    manager.submit(_spec(0))
    manager._settle_queue([], ["j0"], 1.0)  # one failed try
    policy._quantum, policy._desires = 3, {"j9": 2.5}  # type: ignore[attr-defined]
    policy._alloc = {0: {("vu",): 4.0}}  # type: ignore[attr-defined]
    policy._starting = {"j0": ("vu", 2)}  # type: ignore[attr-defined]
    state = manager.export_state()

    store = Store.open(tmp_path / "s.sqlite")
    store.save_state(json.dumps(state))
    again = Manager(acds(quantum=10.0, levels=["site"]), {}, max_tries=5)
    again.submit(_spec(0))
    again.import_state(json.loads(store.saved_state() or "{}"))
    assert again.export_state() == state
    assert next(iter(again._queue.values())).tries == 1
    with pytest.raises(ValueError, match="AC-DS state"):
        again.policy.import_state({"desires": 3})  # type: ignore[attr-defined]


def _restart(fake: FakeSlurm, store: Store) -> Manager:
    """A new manager and adapter over the same journal and site, resumed."""
    again = _manager(fake, store)
    resume(store, again, again.clusters)
    return again


def test_the_retries_spent_survive_a_restart(tmp_path: Path) -> None:
    fake = FakeSlurm(node_names(8))
    store = Store.open(tmp_path / "state.sqlite")
    manager = _manager(fake, store)  # max_retries=1
    manager.submit(_spec(0))
    _cycles(manager, fake, 0, 2)
    fake.finish(store.slurm_ids()[("vu", "j0")], "NODE_FAIL")
    _cycles(manager, fake, 2, 2)
    assert manager.retries == {"j0": 1} and len(_copies(fake, "j0")) == 2
    del manager  # killed: only the journal and the site remain

    again = _restart(fake, store)
    assert again.retries == {"j0": 1}  # the retry spent before the restart still counts
    _cycles(again, fake, 4, 2)
    fake.finish(store.slurm_ids()[("vu", "j0")], "NODE_FAIL")
    _cycles(again, fake, 6, 2)
    record = again.records["j0"]
    assert record.state is JobState.FAILED and "NODE_FAIL" in record.reason
    assert len(_copies(fake, "j0")) == 2  # not a third submission: the bound held
    assert again.failed == [record]


def test_node_failures_survive_a_restart_and_are_not_shed_twice(tmp_path: Path) -> None:
    fake = FakeSlurm(node_names(8))
    store = Store.open(tmp_path / "state.sqlite")
    manager = _manager(fake, store)
    manager.submit(JobSpec("j0", JobKind.MALLEABLE, 2, 8, 8, app="gadget2",
                           size_rule=SizeRule.ANY))
    _cycles(manager, fake, 0, 2)
    job = fake.jobs[store.slurm_ids()[("vu", "j0")]]
    assert len(job.nodes) == 8
    fake.dead = {job.nodes[3]}
    _cycles(manager, fake, 2, 1)
    fake.add_job(1)  # background load takes the freed node: no grow back onto it
    _cycles(manager, fake, 3, 1)
    site = manager.clusters["vu"]
    assert isinstance(site, SlurmCluster)
    (entry,) = site.node_failures
    assert entry["action"] == "shed" and len(job.nodes) == 7
    shed_calls = [c for c in fake.calls if c[3:4] and c[3].startswith("NodeList=")]
    del manager, site

    again = _restart(fake, store)
    restored = again.clusters["vu"]
    assert isinstance(restored, SlurmCluster)
    assert restored.node_failures == [entry]  # reported after the restart too
    _cycles(again, fake, 4, 3)  # the node is still dead: not shed a second time
    assert [c for c in fake.calls if c[3:4] and c[3].startswith("NodeList=")] == shed_calls
    assert restored.node_failures == [entry]
    assert store.node_failures("vu") == [entry] and store.node_failures("uva") == []


def test_a_job_left_on_a_dead_node_is_not_reported_again_after_a_restart(
        tmp_path: Path) -> None:
    fake = FakeSlurm(node_names(4))
    store = Store.open(tmp_path / "state.sqlite")
    manager = _manager(fake, store)
    manager.submit(JobSpec("j0", JobKind.RIGID, 4, 4, 4, app="gadget2"))
    _cycles(manager, fake, 0, 2)
    job = fake.jobs[store.slurm_ids()[("vu", "j0")]]
    fake.dead = {job.nodes[2]}  # a rigid job cannot shed it: left to Slurm (NODE_FAIL)
    _cycles(manager, fake, 2, 2)
    (entry,) = store.node_failures("vu")
    assert entry["action"] == "none" and "cannot shrink" in str(entry["reason"])
    del manager

    again = _restart(fake, store)
    _cycles(again, fake, 4, 3)  # still on the dead node: the same case, not a new one
    assert store.node_failures("vu") == [entry]
    site = again.clusters["vu"]
    assert isinstance(site, SlurmCluster) and site.node_failures == [entry]
