"""The SQLite journal and the resume after a restart (the simulator writes the journal)."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from malleable.adapters.slurm.resize import Outcome, ResizeResult
from malleable.errors import InputError
from malleable.manager import Manager
from malleable.model import ClusterView, JobKind, JobSpec, JobState, Operation, SizeRule
from malleable.policies.koala import KoalaPolicy
from malleable.resources import Capability, JobEvent
from malleable.sim.cluster import SimCluster
from malleable.sim.engine import Engine
from malleable.store import RunInfo, Store, rebuild_records, resume, spec_from_json, spec_to_json


def _spec(i: int, kind: JobKind = JobKind.MALLEABLE, submit: float = 0.0) -> JobSpec:
    high = 8 if kind is JobKind.MALLEABLE else 2
    return JobSpec(f"j{i}", kind, 2, high, 2, submit_time=submit, app="ft",
                   size_rule=SizeRule.POW2)


def test_spec_round_trip() -> None:
    spec = JobSpec("a b", JobKind.MOLDABLE, 1, 4, 2, submit_time=3.5, app="amdahl:0.1",
                   runtime=10.0, preferred_size=3, walltime=60.0, user="u", group="g")
    assert spec_from_json(spec_to_json(spec)) == spec


def test_journal_round_trip(tmp_path: Path) -> None:
    store = Store.open(tmp_path / "state.sqlite")
    spec = _spec(1)
    store.job_submitted(spec)
    store.job_submitted(spec)  # idempotent
    store.operation(Operation(1.0, "place", "j1", "vu", 2))
    store.job_event(JobEvent(2.0, "j1", JobState.RUNNING, 2))
    store.job_event(JobEvent(9.0, "j1", JobState.FAILED, 0, "NODE_FAIL"))
    store.slurm_submitted("vu", "j1", 17)
    token = store.resize_begin("vu", "j1", 17, 2, 4)
    open_token = store.resize_begin("vu", "j1", 17, 4, 8)
    store.resize_end(token, ResizeResult(17, 2, 4, 4, Outcome.DONE, seconds=0.4, helper=18))
    store.close()

    again = Store.open(tmp_path / "state.sqlite")
    assert again.submitted() == [spec]
    assert again.operations() == [Operation(1.0, "place", "j1", "vu", 2)]
    assert again.events()[-1] == JobEvent(9.0, "j1", JobState.FAILED, 0, "NODE_FAIL")
    assert again.slurm_ids() == {("vu", "j1"): 17}
    assert again.open_resizes() == [(open_token, "vu", "j1", 17)]
    assert again.resize_outcomes() == {"done": 1, "None": 1}


def test_run_info_once(tmp_path: Path) -> None:
    store = Store.open(tmp_path / "s.sqlite")
    assert store.run_info() is None
    info = RunInfo("r1", 1000.0, 0.1, "pra", "egs", "wm")
    store.begin_run(info, [_spec(1), _spec(2)])
    assert store.run_info() == info
    assert [s.id for s in store.workload()] == ["j1", "j2"]
    with pytest.raises(InputError, match="already holds a run"):
        store.begin_run(info, [])


def test_schema_version_is_checked(tmp_path: Path) -> None:
    store = Store.open(tmp_path / "s.sqlite")
    store._set_meta("schema", "99")
    store.close()
    with pytest.raises(InputError, match="schema 99"):
        Store.open(tmp_path / "s.sqlite")


def test_unopenable_database(tmp_path: Path) -> None:
    (tmp_path / "dir.sqlite").mkdir()
    with pytest.raises(InputError, match="cannot open the state database"):
        Store.open(tmp_path / "dir.sqlite")


@dataclass
class Adopter:
    """A cluster that only records what it is handed back on resume."""

    name: str
    adopted: list[tuple[str, int | None, int, bool, int]] = field(default_factory=list)
    capabilities: frozenset[Capability] = frozenset()

    def adopt(self, spec: JobSpec, slurm_id: int | None, *, requested: int = 0,
              started: bool = False, size: int = 0, since: float | None = None) -> None:
        self.adopted.append((spec.id, slurm_id, requested, started, size))

    def observe(self) -> ClusterView:
        return ClusterView(self.name, 8, 8)

    def start(self, spec: JobSpec, size: int) -> int:
        return 0

    def offer_grow(self, job_id: str, offer: int) -> int:
        return 0

    def request_shrink(self, job_id: str, amount: int, mandatory: bool) -> int:
        return 0

    def cancel(self, job_id: str) -> None:
        pass

    def drain_events(self) -> Sequence[JobEvent]:
        return []

    def close(self) -> None:
        pass


def _run_until(store: Store, until: float) -> Manager:
    """The simulator, journaling into ``store``, stopped at ``until`` (a crash)."""
    engine = Engine(0.0)
    sims = {"a": SimCluster("a", 8, engine), "b": SimCluster("b", 4, engine)}
    manager = Manager(KoalaPolicy.named("pwa", "fpsma"), sims, journal=store)
    jobs = [_spec(i, JobKind.RIGID if i % 3 == 0 else JobKind.MALLEABLE, submit=i * 10.0)
            for i in range(1, 9)]
    for spec in jobs:
        engine.at(spec.submit_time, lambda s=spec: manager.submit(s))
    engine.run(lambda now: bool(manager.cycle(now)) or True, until=until)
    return manager


def test_resume_rebuilds_the_manager_and_hands_jobs_back(tmp_path: Path) -> None:
    store = Store.open(tmp_path / "s.sqlite")
    store.slurm_submitted("a", "j1", 101)
    before = _run_until(store, 75.0)
    token = store.resize_begin("a", "j1", 101, 2, 4)  # in flight at the crash
    store.close()
    running_before = {j for j, r in before.records.items()
                      if r.start is not None and not r.state.finished}
    waiting_before = {w.id for w in before._queue.values()}
    assert running_before and waiting_before and before.operations  # not trivial

    store = Store.open(tmp_path / "s.sqlite")
    adapters = {"a": Adopter("a"), "b": Adopter("b")}
    after = Manager(KoalaPolicy.named("pwa", "fpsma"), adapters, journal=store)
    found = resume(store, after, adapters)

    assert found.jobs == len(before.records) and found.interrupted_resizes == 1
    assert store.open_resizes() == []
    assert token not in [t for t, *_ in store.open_resizes()]
    for job_id, record in before.records.items():
        again = after.records[job_id]
        assert (again.state, again.cluster, again.start, again.end) == (
            record.state, record.cluster, record.start, record.end)
        assert again.sizes == record.sizes
    handed = {a[0]: a for ad in adapters.values() for a in ad.adopted}
    placed_unfinished = {j for j, r in before.records.items()
                         if r.cluster and not r.state.finished}
    assert set(handed) == placed_unfinished
    assert handed.get("j1", ("j1", 101))[1] == 101
    for job_id in running_before:
        _, _, _, started, size = handed[job_id]
        assert started and size == before.records[job_id].sizes[-1][1]
    assert {w.id for w in after._queue.values()} == waiting_before
    assert after.unfinished == before.unfinished
    assert after.operations == before.operations


def test_rebuild_marks_rejected_and_cancelled_waiting_jobs(tmp_path: Path) -> None:
    store = Store.open(tmp_path / "s.sqlite")
    for i in (1, 2, 3):
        store.job_submitted(_spec(i))
    store.operation(Operation(1.0, "reject", "j1", "", 0))
    store.operation(Operation(2.0, "cancel", "j2", "", 0))
    records, where = rebuild_records(store)
    states = {r.spec.id: r.state for r in records}
    assert states == {"j1": JobState.FAILED, "j2": JobState.CANCELLED, "j3": JobState.WAITING}
    assert where == {}


def test_resume_refuses_a_cluster_missing_from_the_config(tmp_path: Path) -> None:
    store = Store.open(tmp_path / "s.sqlite")
    store.job_submitted(_spec(1))
    store.operation(Operation(1.0, "place", "j1", "gone", 2))
    manager = Manager(KoalaPolicy.named("pra", "fpsma"), {"a": Adopter("a")})
    with pytest.raises(InputError, match="'gone', which is not in the config"):
        resume(store, manager, {"a": Adopter("a")})


def test_tokens_are_right_when_threads_journal_at_once(tmp_path: Path) -> None:
    """Adapters' workers journal intents and resizes while the manager's thread journals
    its own: each token must name the row its caller wrote (the connection's last insert
    is shared by every thread; found in the kill points, resizes left open in the journal
    and another one closed twice)."""
    store = Store.open(tmp_path / "state.sqlite")
    wrong: list[str] = []

    def journal(k: int) -> None:
        for i in range(300):
            job = f"j{k}-{i}"
            token = store.intent("helper", f"s{k}", job, i)
            resize = store.resize_begin(f"s{k}", job, i, 1, 2)
            if store._rows("SELECT job_id FROM intents WHERE id = ?", (token,)) != [(job,)]:
                wrong.append(f"intent {job}")
            if store._rows("SELECT job_id FROM resizes WHERE id = ?", (resize,)) != [(job,)]:
                wrong.append(f"resize {job}")

    threads = [threading.Thread(target=journal, args=(k,)) for k in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    store.close()
    assert wrong == []
