"""OarCluster on the fake OAR (tests/fakes/oar.py): the extension-job emulation of
malleability, events, background load, and what is never reported as completed."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from malleable.adapters.oar.cluster import OarCluster, job_name
from malleable.adapters.oar.ctl import OarCtl
from malleable.adapters.oar.payload import OarPayload
from malleable.clock import ScaledClock
from malleable.manager import Manager
from malleable.model import JobKind, JobSpec, JobState
from malleable.policies.koala import KoalaPolicy
from malleable.store import Store
from tests.fakes.oar import FakeOar
from tests.fakes.slurm import node_names


class Journal:
    def __init__(self) -> None:
        self.ids: dict[str, int] = {}
        self.parts: dict[int, tuple[str, bool]] = {}  # extension -> (job, released)
        self.failures: list[object] = []

    def native_submitted(self, site: str, job_id: str, native_id: int) -> None:
        self.ids[job_id] = native_id

    def extensions_added(self, site: str, job_id: str, native_ids: Sequence[int]) -> None:
        self.parts.update((n, (job_id, False)) for n in native_ids)

    def extensions_released(self, site: str, job_id: str, native_ids: Sequence[int]) -> None:
        self.parts.update((n, (job_id, True)) for n in native_ids)

    def node_failure(self, site: str, entry: object) -> None:
        self.failures.append(entry)

    def extensions(self, site: str, job_id: str) -> tuple[list[int], list[int]]:
        mine = sorted((n, r) for n, (j, r) in self.parts.items() if j == job_id)
        return [n for n, r in mine if not r], [n for n, r in mine if r]


def _site(nodes: int = 6, delay: int = 0) -> tuple[FakeOar, OarCluster]:
    fake = FakeOar(node_names(nodes), start_delay=delay)
    clock = ScaledClock(float(fake.now), 1.0, wall=lambda: float(fake.now))
    return fake, OarCluster("grid", OarCtl(fake), clock, "r1", OarPayload(0.01),
                            sleep=lambda s: None, journal=Journal())


def _malleable(job: str, low: int = 1, high: int = 6, size: int = 2) -> JobSpec:
    return JobSpec(job, JobKind.MALLEABLE, low, high, size, app="fixed", runtime=100.0)


def test_start_is_a_base_job_of_the_minimum_and_extensions_for_the_rest() -> None:
    fake, oar = _site()
    assert oar.start(_malleable("a", low=2), 4) == 4
    jobs = sorted(fake.jobs.values(), key=lambda j: j.job_id)
    assert [(j.name, j.want) for j in jobs] == [(job_name("r1", "a"), 2)] + [
        (job_name("r1", "a") + "+", 1)] * 2
    script_path = next(p for p in fake.files if p.endswith(".py"))
    assert "SIZE_FILE" in fake.files[script_path]
    events = oar.drain_events()
    assert [(e.state, e.size) for e in events] == [(JobState.RUNNING, 4)]
    view = oar.observe()
    assert list(view.running) == ["a"] and view.running["a"].size == 4 and view.idle == 2
    assert fake.files[script_path.removesuffix(".py") + ".size"] == "4\n"  # told its size
    assert oar.journal is not None and oar.journal.ids == {"a": 1}  # type: ignore[attr-defined]


def test_rigid_job_is_one_job_and_is_never_resized() -> None:
    fake, oar = _site()
    oar.start(JobSpec("r", JobKind.RIGID, 3, 3, 3, app="fixed", runtime=10.0), 3)
    oar.drain_events()
    assert len(fake.jobs) == 1
    assert oar.offer_grow("r", 2) == 0 and oar.request_shrink("r", 1, True) == 0


def test_grow_adds_running_extensions_and_shrink_deletes_the_newest() -> None:
    fake, oar = _site()
    oar.start(_malleable("a"), 2)
    oar.drain_events()
    assert oar.offer_grow("a", 3) == 3
    assert oar.observe().running["a"].size == 5
    assert oar.request_shrink("a", 2, False) == 2
    deleted = [j for j in fake.jobs.values() if j.state == "Error"]
    assert sorted(j.job_id for j in deleted) == [4, 5]  # the two newest extensions
    view = oar.observe()
    assert view.running["a"].size == 3 and "oar:grid:4" not in view.running
    assert [e.size for e in oar.drain_events()] == [5, 3]
    assert [v for p, v in fake.files.items() if p.endswith(".size")] == ["3\n"]


def test_shrink_never_goes_below_the_base_job() -> None:
    _, oar = _site()
    oar.start(_malleable("a", low=2), 3)
    oar.drain_events()
    assert oar.request_shrink("a", 3, True) == 1
    assert oar.observe().running["a"].size == 2


def test_extensions_that_do_not_start_in_time_are_deleted_and_not_counted() -> None:
    fake, oar = _site(nodes=3)
    oar.grow_wait = 0.0
    oar.start(_malleable("a"), 2)
    oar.drain_events()
    fake.add_job(1, "someone")  # takes the last node
    assert oar.offer_grow("a", 1) == 0
    assert [j.state for j in fake.jobs.values() if j.name.endswith("+")][-1] == "Error"
    assert oar.observe().running["a"].size == 2


def test_cancel_ends_cancelled_and_the_end_of_the_base_deletes_its_extensions() -> None:
    fake, oar = _site()
    oar.start(_malleable("a"), 3)
    oar.start(_malleable("b"), 2)
    oar.drain_events()
    oar.cancel("a")
    fake.now += 5
    ends = [e for e in oar.drain_events() if e.state.finished]
    assert [(e.job_id, e.state) for e in ends] == [("a", JobState.CANCELLED)]
    base_b = oar.native_id("b")
    assert base_b is not None
    fake.finish(base_b)
    ends = [e for e in oar.drain_events() if e.state.finished]
    assert [(e.job_id, e.state) for e in ends] == [("b", JobState.COMPLETED)]
    assert all(j.state in ("Terminated", "Error") for j in fake.jobs.values())


def test_a_vanished_job_fails_and_a_failing_one_is_not_completed() -> None:
    fake, oar = _site()
    oar.start(_malleable("a"), 1)
    oar.start(_malleable("b"), 1)
    oar.drain_events()
    base_a, base_b = oar.native_id("a"), oar.native_id("b")
    assert base_a is not None and base_b is not None
    del fake.jobs[base_a]
    fake.finish(base_b, exit_code=768)
    ends = {e.job_id: e.state for e in oar.drain_events() if e.state.finished}
    assert ends == {"a": JobState.FAILED, "b": JobState.FAILED}


def test_other_jobs_are_background_and_pending_jobs_claim_their_nodes() -> None:
    fake, oar = _site(nodes=4, delay=3)
    fake.start_delay = 0
    fake.add_job(2, "someone")
    fake.start_delay = 3
    oar.start(_malleable("a"), 1)
    view = oar.observe()
    assert view.running["oar:grid:1"].managed is False and view.running["oar:grid:1"].size == 2
    assert "a" not in view.running and view.idle == 1  # a's pending base claims one node


def test_start_beyond_the_platform_is_refused_whole() -> None:
    fake, oar = _site(nodes=3)
    assert oar.start(_malleable("big", high=8), 4) == 0
    assert fake.jobs == {}


def test_an_extension_oar_accepted_after_a_timed_out_submission_is_adopted_by_name() -> None:
    fake, oar = _site()
    oar.start(_malleable("a"), 2)
    oar.drain_events()
    fake.add_job(1, job_name("r1", "a") + "+")  # as if oarsub answered too late
    events = oar.drain_events()
    assert [(e.job_id, e.size) for e in events] == [("a", 3)]
    assert oar.request_shrink("a", 2, False) == 2  # both extensions are the job's own


def test_grow_is_one_array_submission() -> None:
    fake, oar = _site()
    oar.start(_malleable("a"), 1)
    oar.drain_events()
    assert oar.offer_grow("a", 3) == 3
    subs = [c for c in fake.calls if c[:2] == ["oarsub", "-J"]]
    assert subs[-1][2:4] == ["--array", "3"] and len(subs) == 2


def test_the_start_waits_for_the_start_time_extensions_to_leave_waiting() -> None:
    # The contract flake: OAR ran the base job a poll before its extension, and the start
    # event said 1 for a granted 2 (then a "grow" to 2 the manager never asked for).
    fake, oar = _site(nodes=4, delay=2)
    assert oar.start(_malleable("a"), 2) == 2
    base = oar.native_id("a")
    seen: list[tuple[str, int]] = []
    windows = 0
    for _ in range(6):
        oar.refresh()
        view = oar.observe()
        both = [fake.jobs[j].state for j in sorted(fake.jobs)]  # as the view's poll saw them
        if "a" in view.running:
            seen.append(("view", view.running["a"].size))
        else:
            assert view.idle == 2, view  # a's nodes, held or not yet, are never idle
        windows += both == ["Running", "Waiting"]  # the window the flake fell into
        seen += [("event", e.size) for e in oar.drain_events() if e.job_id == "a"]
    assert fake.jobs[base or 0].state == "Running"
    assert ("event", 2) in seen and all(size == 2 for _, size in seen), seen
    assert [s for s in seen if s[0] == "event"] == [("event", 2)]
    assert windows >= 1  # the base ran a poll before its extension did


def test_start_time_extensions_that_never_leave_waiting_are_deleted_and_not_counted() -> None:
    fake, oar = _site(nodes=3)
    oar.grow_wait = oar.grow_wait_per_node = 0.0
    fake.add_job(2, "someone")  # one node left: the base runs, its extension waits
    assert oar.start(_malleable("a"), 2) == 2
    oar.refresh()
    events = [(e.state, e.size) for e in oar.drain_events() if e.job_id == "a"]
    assert events == [(JobState.RUNNING, 1)]
    assert [j.state for j in fake.jobs.values() if j.name.endswith("+")] == ["Error"]
    assert oar.observe().running["a"].size == 1 and oar.request_shrink("a", 1, True) == 0


def _restart(fake: FakeOar, journal: object) -> OarCluster:
    """A new adapter over the same site and journal (a manager restart)."""
    clock = ScaledClock(float(fake.now), 1.0, wall=lambda: float(fake.now))
    return OarCluster("grid", OarCtl(fake), clock, "r1", OarPayload(0.01),
                      sleep=lambda s: None, journal=journal)  # type: ignore[arg-type]


@pytest.mark.parametrize("poll_first", [False, True])
def test_extension_jobs_are_journaled_and_taken_back_after_a_restart(
        tmp_path: Path, poll_first: bool) -> None:
    # Before, extensions were found again by name at the first poll: one the adapter had
    # released but OAR still listed (Finishing) came back as live, and the next shrink
    # "released" it again while the live one kept its node.
    store = Store.open(tmp_path / "state.db")
    fake = FakeOar(node_names(6), finishing=20)
    first = _restart(fake, store)
    spec = _malleable("a")
    assert first.start(spec, 3) == 3  # base 1 + extensions 2 and 3
    first.drain_events()
    assert first.request_shrink("a", 1, False) == 1  # oardel 3: Finishing for a while
    base = first.native_id("a")
    assert store.extensions("grid", "a") == ([2], [3]) and base == 1
    assert fake.jobs[3].state == "Finishing"

    second = _restart(fake, store)  # what store.resume hands the adapter
    second.adopt(spec, base, requested=3, started=True, size=2, since=float(fake.now))
    if poll_first:
        second.refresh()  # OAR lists 2 (running) and 3 (Finishing), both named a's
    assert second.request_shrink("a", 1, True) == 1  # job 2, even before any poll
    assert fake.jobs[2].state == "Finishing" and store.extensions("grid", "a") == ([], [2, 3])
    events = [(e.state, e.size) for e in second.drain_events()]
    assert events == [(JobState.RUNNING, 1)] and second.observe().running["a"].size == 1
    store.close()


def test_an_abandoned_job_is_deleted_at_the_next_poll_and_reported_no_more() -> None:
    fake, oar = _site()
    oar.start(_malleable("a"), 3)  # a base job and two extensions
    oar.start(_malleable("b"), 2)
    oar.drain_events()
    oar.abandon(["a"])  # the manager recorded it failed: its site was given up
    assert oar.observe().running.get("a") is None or not oar.observe().running["a"].managed
    assert oar.offer_grow("a", 1) == 0 and oar.request_shrink("a", 1, True) == 0
    fake.now += 5
    oar.refresh()
    named = job_name("r1", "a")
    mine = [j for j in fake.jobs.values() if j.name in (named, named + "+")]
    assert len(mine) == 3 and all(j.state == "Error" for j in mine)  # all three deleted
    assert oar.drain_events() == []  # its end is not reported: it is recorded already
    fake.now += 5
    oar.refresh()
    assert not oar._abandoned  # nothing of it left: no more deletes
    others = [j for j in fake.jobs.values() if not j.name.startswith(named)]
    assert others and all(j.state == "Running" for j in others)  # b untouched


def _running_at(fake: FakeOar, oar: OarCluster, spec: JobSpec, size: int) -> None:
    assert oar.start(spec, size) == size
    assert [(e.state, e.size) for e in oar.drain_events()] == [(JobState.RUNNING, size)]


def test_an_extension_on_a_dead_node_is_deleted_and_the_job_runs_on_smaller() -> None:
    fake, oar = _site()
    _running_at(fake, oar, _malleable("a", low=2), 4)
    _, *exts = sorted(fake.jobs)
    fake.dead.add(fake.jobs[exts[-1]].nodes[0])
    oar.refresh()
    events = oar.drain_events()
    assert [(e.state, e.size) for e in events] == [(JobState.RUNNING, 3)]
    assert fake.jobs[exts[-1]].events == ["FRAG_JOB_REQUEST"]  # deleted (OAR cannot yet)
    assert fake.jobs[exts[-1]].state == "Running"
    assert oar.observe().running["a"].size == 3
    assert oar.journal.parts[exts[-1]] == ("a", True)  # type: ignore[attr-defined]
    assert oar.node_failures == [{"job": "a", "oar_ids": [exts[-1]], "action": "shed",
                                  "dead": fake.jobs[exts[-1]].nodes[0]}]
    oar.refresh()
    assert oar.drain_events() == [] and len(oar.node_failures) == 1  # once
    # the job still grows and shrinks with the extensions it has left
    assert oar.request_shrink("a", 1, True) == 1
    assert oar.observe().running["a"].size == 2
    assert fake.files[next(p for p in fake.files if p.endswith(".size"))] == "2\n"


def test_a_base_job_on_a_dead_node_fails_retriable_and_its_extensions_go() -> None:
    fake, oar = _site()
    _running_at(fake, oar, _malleable("a", low=2), 4)
    _running_at(fake, oar, _malleable("b", low=1), 1)
    base, *exts = sorted(j for j in fake.jobs if fake.jobs[j].name.startswith("m.r1.a"))
    dead = fake.jobs[base].nodes[1]
    fake.dead.add(dead)
    oar.refresh()
    [event] = oar.drain_events()
    assert (event.job_id, event.state, event.retriable) == ("a", JobState.FAILED, True)
    assert event.reason == f"OAR node {dead} Suspected under its base job {base}"
    assert [fake.jobs[e].state for e in exts] == ["Error", "Error"]  # deleted
    assert fake.jobs[base].events == ["FRAG_JOB_REQUEST"]
    assert oar.node_failures == [{"job": "a", "oar_ids": [base, *exts], "action": "failed",
                                  "dead": dead}]
    assert oar.journal.parts[exts[0]] == ("a", True)  # type: ignore[attr-defined]
    oar.refresh()
    assert oar.drain_events() == []  # nothing more of a
    view = oar.observe()
    assert "a" not in view.running and view.running["b"].size == 1
    # of 5 live nodes: b's, and the live one of a's base job, which OAR still holds
    assert view.nodes == 5 and view.idle == 3


def test_absent_nodes_are_not_dead_and_node_failures_come_back_after_a_restart(
        tmp_path: Path) -> None:
    fake, oar = _site()
    store = Store.open(tmp_path / "s.sqlite")
    oar.journal = store
    _running_at(fake, oar, _malleable("a", low=1), 3)
    fake.absent.add(fake.jobs[2].nodes[0])  # drained by an administrator: the job goes on
    oar.refresh()
    assert oar.drain_events() == [] and oar.node_failures == []
    assert oar.observe().running["a"].size == 3
    fake.dead.add(fake.jobs[3].nodes[0])
    oar.refresh()
    assert [(e.state, e.size) for e in oar.drain_events()] == [(JobState.RUNNING, 2)]
    assert store.extensions("grid", "a") == ([2], [3])
    _, again = _site()
    again.restore_node_failures(store.node_failures("grid"))
    assert again.node_failures == oar.node_failures != []
    store.close()


def test_pwa_shrinks_once_for_a_waiting_job_while_oar_finishes_the_released_extension() -> None:
    """``manager run`` on OAR: a released extension stays ``Finishing`` for a while; were its
    node busy in the view, PWA would shrink the job again for the same waiting job (3 -> 2
    -> 1, seen with ``manager serve`` on the testbed)."""
    fake, oar = _site(nodes=4)
    fake.finishing = 6  # commands: several manager cycles
    manager = Manager(KoalaPolicy.named("pwa", "fpsma"), {"grid": oar})
    manager.submit(_malleable("a", low=1, high=3, size=3))
    for now in range(3):
        manager.cycle(float(now))
    assert manager.records["a"].sizes[-1][1] == 3 and oar.observe().idle == 1
    manager.submit(JobSpec("b", JobKind.RIGID, 2, 2, 2, app="fixed", runtime=100.0))
    sizes: list[int] = []
    finishing = 0
    for now in range(3, 12):
        manager.cycle(float(now))
        sizes.append(manager.records["a"].sizes[-1][1])
        finishing += any(j.state == "Finishing" for j in fake.jobs.values())
    assert finishing >= 2  # the released extension outlived more than one cycle
    assert min(sizes) == 2 and sizes[-1] == 2, sizes
    assert manager.records["b"].sizes and manager.records["b"].sizes[-1][1] == 2
    shrinks = [o for o in manager.operations if o.job_id == "a" and o.kind == "shrink"]
    assert len(shrinks) == 1, shrinks
