"""The site service on the fake Slurm: discovery of users' tagged jobs, placement by
release, growth and shrink through the Slurm adapter, owner checks, bounded polling,
restart from the journal, status and metrics."""

from __future__ import annotations

import logging
import time
from pathlib import Path

import pytest
from prometheus_client import generate_latest

import malleable.adapters.slurm.meta as meta
from malleable.adapters.slurm.ctl import SlurmCtl
from malleable.commands.serve import _print_status
from malleable.config import SiteConfig
from malleable.model import JobKind, JobSpec
from malleable.site import tag as tags
from malleable.site.assembly import open_service
from malleable.site.config import parse_service_config
from malleable.site.daemon import SiteService
from malleable.site.driver import ServiceDriver, driver_for
from tests.fakes.service_config import open_quick, run_cycles
from tests.fakes.slurm import FakeSlurm, node_names

ACCOUNT = "malleable"


def _config(tmp_path: Path, sites: tuple[str, ...] = ("vu",), approach: str = "pra",
            grace: float = 30.0):
    doc = {"service": {"state": str(tmp_path / "state.sqlite"), "poll": 1.0,
                       "copies_grace": grace},
           "policy": {"name": "fpsma", "options": {"approach": approach}},
           "clusters": {name: {} for name in sites}}
    return parse_service_config(doc, str(tmp_path / "manager.toml"), tmp_path)


class Sites:
    """One fake Slurm per site; the service's commands go to them as `malleable`."""

    def __init__(self, *names: str, nodes: int = 8) -> None:
        self.fakes = {name: FakeSlurm(node_names(nodes), admin_levels={ACCOUNT: "Operator"})
                      for name in names}

    def ctl(self, site: SiteConfig) -> SlurmCtl:
        return SlurmCtl(self.fakes[site.name], user=ACCOUNT)


def _open(tmp_path: Path, sites: Sites, wall=time.time,
          **kw: object) -> tuple[SiteService, ServiceDriver]:
    return open_quick(_config(tmp_path, tuple(sites.fakes), **kw), sites.ctl, wall=wall)


def _submit(fake: FakeSlurm, user: str, low: int, high: int, nodes: int, sub: str | None = None,
            held: bool = True, copies: int | None = None):
    comment = tags.encode(tags.UserTag(low, high, sub=sub, copies=copies), user)
    return fake.add_job(nodes, comment, name="app", user=user, held=held)


def _touched(fake: FakeSlurm, slurm_id: int) -> list[list[str]]:
    """Commands other than the poll and read-backs that named ``slurm_id``."""
    return [c for c in fake.calls if str(slurm_id) in " ".join(c)
            and c[:4] != ["scontrol", "-o", "show", "job"] and c[:2] != ["sh", "-c"]
            and c[:2] != ["squeue", "--json"]]


def test_users_jobs_are_placed_grown_and_the_rigid_one_is_left_alone(tmp_path: Path) -> None:
    sites = Sites("vu")
    fake = sites.fakes["vu"]
    carol = fake.add_job(2, "", name="rigid", user="carol")
    alice = _submit(fake, "alice", 1, 4, 1)
    service, driver = _open(tmp_path, sites)
    run_cycles(driver)  # discovered, placed: NumNodes set, released
    assert alice.state == "RUNNING" and not alice.held
    assert ["scontrol", "release", str(alice.job_id)] in fake.calls
    run_cycles(driver, 2)  # followed, then grown by FPSMA into the idle nodes
    assert len(alice.nodes) == 4
    assert fake.jobs[carol.job_id].state == "RUNNING" and len(carol.nodes) == 2
    assert _touched(fake, carol.job_id) == []
    job = service.manager.records[f"alice:vu.{alice.job_id}"]
    assert job.spec.user == "alice" and job.sizes[-1][1] == 4
    service.close()


def test_an_administrators_hold_is_never_undone(tmp_path: Path,
                                              caplog: pytest.LogCaptureFixture,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    """bob's tagged job held by root (``JobHeldAdmin``) stays held, with one log line and
    a line of ``manager status``; once the administrator releases it, it is placed. A hold
    that comes between the poll and the placement is seen too (read again before the
    release)."""
    caplog.set_level(logging.WARNING, "malleable.site")
    sites = Sites("vu")
    fake = sites.fakes["vu"]
    bob = _submit(fake, "bob", 1, 4, 1)
    bob.admin_hold = True
    service, driver = _open(tmp_path, sites)
    run_cycles(driver, 3)
    assert bob.state == "PENDING" and bob.held and bob.admin_hold
    assert ["scontrol", "release", str(bob.job_id)] not in fake.calls
    lines = [r.getMessage() for r in caplog.records if "event=admin_hold" in r.getMessage()]
    assert len(lines) == 1 and f"slurm_id={bob.job_id} user=bob" in lines[0]
    [site] = service.status()["sites"]
    assert site["admin_held"] == [bob.job_id]
    _print_status({**service.status(), "running": True, "stale": False, "pending_resizes": []})
    assert f"held by an administrator (left held): {bob.job_id}" in capsys.readouterr().out
    bob.admin_hold = False  # the administrator releases it to the user's hold
    run_cycles(driver)
    assert bob.state == "RUNNING"

    alice = _submit(fake, "alice", 1, 2, 1)
    adapter = service.adapters["vu"]
    adapter.refresh()
    alice.admin_hold = True  # after the poll, before the placement
    spec = service.manager.records.get(f"alice:vu.{alice.job_id}")
    assert spec is None or spec.state.value != "running"
    assert adapter.start(JobSpec(f"alice:vu.{alice.job_id}", JobKind.MALLEABLE, 1, 2, 1),
                         1) == 0
    assert alice.admin_hold and ["scontrol", "release", str(alice.job_id)] not in fake.calls
    service.close()


def test_bob_shrinks_alice_when_he_needs_room(tmp_path: Path) -> None:
    sites = Sites("vu", nodes=6)
    fake = sites.fakes["vu"]
    alice = _submit(fake, "alice", 2, 6, 2)
    service, driver = _open(tmp_path, sites, approach="pwa")  # waiting jobs first
    run_cycles(driver, 3)
    assert len(alice.nodes) == 6
    bob = _submit(fake, "bob", 2, 4, 2)
    run_cycles(driver, 3)  # FPSMA shrinks alice to place bob
    assert bob.state == "RUNNING" and len(bob.nodes) >= 2
    assert len(alice.nodes) <= 4
    ops = {op.kind for op in service.manager.operations}
    assert {"place", "grow", "shrink"} <= ops
    service.close()


def test_copies_on_two_sites_one_is_released_the_other_cancelled(tmp_path: Path) -> None:
    sites = Sites("vu", "leiden", nodes=4)
    sites.fakes["vu"].add_job(3, "", user="carol")  # vu is busy: worst fit picks leiden
    first = _submit(sites.fakes["vu"], "alice", 1, 2, 1, sub="s1")
    second = _submit(sites.fakes["leiden"], "alice", 1, 2, 1, sub="s1")
    service, driver = _open(tmp_path, sites)
    run_cycles(driver, 2)
    assert second.state == "RUNNING"
    assert first.state == "CANCELLED"
    assert service.manager.cluster_of("alice:s1") == "leiden"
    service.close()


def test_without_the_number_of_copies_the_first_copy_found_is_placed(tmp_path: Path) -> None:
    """The race the ``copies`` key closes: a poll between two submissions sees one copy
    and places the job there, though the second site has more room."""
    sites = Sites("vu", "leiden", nodes=4)
    sites.fakes["vu"].add_job(3, "", user="carol")
    first = _submit(sites.fakes["vu"], "alice", 1, 2, 1, sub="s1")
    service, driver = _open(tmp_path, sites)
    run_cycles(driver)
    second = _submit(sites.fakes["leiden"], "alice", 1, 2, 1, sub="s1")
    run_cycles(driver, 2)
    assert first.state == "RUNNING" and second.state == "CANCELLED"
    assert service.manager.cluster_of("alice:s1") == "vu"
    service.close()


def test_a_copy_found_one_poll_later_is_awaited_and_the_better_site_chosen(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    sites = Sites("vu", "leiden", nodes=4)
    sites.fakes["vu"].add_job(3, "", user="carol")  # vu has 1 free node, leiden 4
    first = _submit(sites.fakes["vu"], "alice", 1, 2, 1, sub="s1", copies=2)
    service, driver = _open(tmp_path, sites)
    with caplog.at_level(logging.INFO, logger="malleable.site.daemon"):
        run_cycles(driver, 2)  # only the vu copy so far: adopted, not placed, no failed try
        assert first.state == "PENDING" and first.held
        assert service.manager.waiting == 1 and service.copies == {"alice:s1": {"vu"}}
        assert service.offered == {"alice:s1": frozenset()}
        assert service.manager.export_state()["tries"] == {}
        assert _touched(sites.fakes["vu"], first.job_id) == []
        assert service.status()["jobs"][0]["copies"] == ["vu"]
        second = _submit(sites.fakes["leiden"], "alice", 1, 2, 1, sub="s1", copies=2)
        run_cycles(driver, 2)
    assert second.state == "RUNNING" and first.state == "CANCELLED"
    assert service.manager.cluster_of("alice:s1") == "leiden"
    assert "event=copy_missing" not in caplog.text
    awaited = [r.getMessage() for r in caplog.records if "event=copies_awaited" in r.getMessage()]
    assert awaited == ["event=copies_awaited job=alice:s1 found=1 announced=2 sites=vu grace=30"]
    assert service._awaiting == set()  # placed: forgotten
    service.close()


def test_a_copy_that_never_shows_is_given_up_after_the_grace_with_one_line(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    sites = Sites("vu", "leiden", nodes=4)
    sites.fakes["vu"].add_job(3, "", user="carol")
    first = _submit(sites.fakes["vu"], "alice", 1, 2, 1, sub="s1", copies=2)
    skew = [0.0]
    service, driver = _open(tmp_path, sites, wall=lambda: time.time() + skew[0], grace=20.0)
    with caplog.at_level(logging.INFO, logger="malleable.site.daemon"):
        run_cycles(driver, 2)
        assert first.state == "PENDING" and service.manager.waiting == 1
        skew[0] = 19.0  # within the grace: still waiting
        run_cycles(driver)
        assert first.state == "PENDING" and "event=copy_missing" not in caplog.text
        skew[0] = 21.0  # past it: placed where its copy is
        run_cycles(driver, 3)
    assert first.state == "RUNNING" and service.manager.cluster_of("alice:s1") == "vu"
    missing = [r.getMessage() for r in caplog.records if "event=copy_missing" in r.getMessage()]
    assert len(missing) == 1 and missing[0].startswith(
        "event=copy_missing job=alice:s1 found=1 announced=2 sites=vu waited=2")
    assert "placed where its copies are" in missing[0]
    assert service._missing == set() and service._announced == {}  # the job left the queue
    service.close()


def test_a_reload_keeps_awaiting_announced_copies(tmp_path: Path) -> None:
    sites = Sites("vu", "leiden", nodes=4)
    sites.fakes["vu"].add_job(3, "", user="carol")
    first = _submit(sites.fakes["vu"], "alice", 1, 2, 1, sub="s1", copies=2)
    service, driver = _open(tmp_path, sites)
    (tmp_path / "manager.toml").write_text(
        f'[service]\nstate = "{tmp_path / "state.sqlite"}"\npoll = 1.0\n'
        '[policy]\nname = "fpsma"\n[clusters.vu]\n[clusters.leiden]\n')
    run_cycles(driver)
    assert service.reload(driver)
    run_cycles(driver, 2)
    assert first.state == "PENDING" and service.manager.waiting == 1
    second = _submit(sites.fakes["leiden"], "alice", 1, 2, 1, sub="s1", copies=2)
    run_cycles(driver, 2)
    assert second.state == "RUNNING" and first.state == "CANCELLED"
    service.close()


def test_no_more_copies_are_awaited_than_the_service_has_sites(tmp_path: Path) -> None:
    sites = Sites("vu", "leiden", nodes=4)
    first = _submit(sites.fakes["vu"], "alice", 1, 2, 1, sub="s1", copies=3)
    second = _submit(sites.fakes["leiden"], "alice", 1, 2, 1, sub="s1", copies=3)
    service, driver = _open(tmp_path, sites)
    run_cycles(driver, 2)  # two sites, two copies found: placed at once
    assert {first.state, second.state} == {"RUNNING", "CANCELLED"}
    service.close()


def test_the_grace_counts_from_the_first_adoption_across_a_restart(tmp_path: Path) -> None:
    sites = Sites("vu", "leiden", nodes=4)
    first = _submit(sites.fakes["vu"], "alice", 1, 2, 1, sub="s1", copies=2)
    skew = [0.0]
    service, driver = _open(tmp_path, sites, wall=lambda: time.time() + skew[0], grace=20.0)
    run_cycles(driver)
    service.close()
    skew[0] = 10.0
    service, driver = _open(tmp_path, sites, wall=lambda: time.time() + skew[0], grace=20.0)
    run_cycles(driver)
    assert first.state == "PENDING" and service.manager.waiting == 1
    skew[0] = 21.0
    run_cycles(driver, 2)
    assert first.state == "RUNNING"
    service.close()


def test_a_job_pinned_to_a_busy_site_waits_there(tmp_path: Path) -> None:
    sites = Sites("vu", "leiden", nodes=4)
    sites.fakes["vu"].add_job(4, "", user="carol")
    alice = _submit(sites.fakes["vu"], "alice", 2, 2, 2)
    service, driver = _open(tmp_path, sites)
    run_cycles(driver, 3)
    assert alice.state == "PENDING" and alice.held
    assert service.manager.waiting == 1
    assert not any(c[:1] == ["sbatch"] for f in sites.fakes.values() for c in f.calls)
    service.close()


def test_bad_and_forged_tags_are_logged_once_and_never_acted_on(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    sites = Sites("vu")
    fake = sites.fakes["vu"]
    claims = fake.add_job(1, '{"malleable_job":1,"min":1,"max":8,"user":"alice"}', user="bob")
    broken = fake.add_job(1, '{"malleable_job":1,"min":-1,', user="bob")
    huge = fake.add_job(1, '{"malleable_job":1,"min":1,"max":4,"x":"' + "y" * 5000 + '"}',
                        user="bob")
    array = fake.add_job(1, '[{"malleable_job":1,"min":1,"max":4}]', user="bob")
    real = fake.add_job(1, '{"malleable_job":1.0,"min":1,"max":4}', user="bob")
    service, driver = _open(tmp_path, sites)
    internal = meta.encode(meta.Tag(service.info.run_id, job="alice:x"))
    forged = fake.add_job(1, internal, user="bob")  # the service's own tag on bob's job
    helper = fake.add_job(1, meta.encode(meta.Tag(service.info.run_id, helper_for=claims.job_id)),
                          user="bob")
    with caplog.at_level(logging.WARNING):
        run_cycles(driver, 3)
    ignored = [r for r in caplog.records if "event=tag_ignored" in r.getMessage()]
    assert sorted(int(r.getMessage().split("slurm_id=")[1].split()[0]) for r in ignored) == \
        sorted([claims.job_id, broken.job_id, huge.job_id, forged.job_id, helper.job_id,
                array.job_id, real.job_id])
    for job in (claims, broken, huge, forged, helper, array, real):
        assert fake.jobs[job.job_id].state == "RUNNING"
        assert _touched(fake, job.job_id) == []
    assert service.manager.records == {}
    status = service.status()
    assert status["sites"][0]["ignored_tags"] == 7
    assert b"malleable_tags_ignored_total 7.0" in generate_latest(service.metrics.registry)
    service.close()


def test_polls_are_bounded_whatever_the_number_of_jobs(tmp_path: Path) -> None:
    sites = Sites("vu", nodes=400)
    fake = sites.fakes["vu"]
    for i in range(150):
        fake.add_job(1, "", user="carol", name=f"bg{i}")
    for _ in range(100):
        _submit(fake, "alice", 2, 2, 2, held=False)  # rigid-sized: nothing to resize
    service, driver = _open(tmp_path, sites)
    run_cycles(driver, 3)  # adopted, followed
    assert service.manager.unfinished == 100
    fake.calls.clear()
    run_cycles(driver, 5)
    assert len(fake.calls) == 5  # one poll per cycle, nothing else
    for job in list(fake.jobs.values())[150:160]:
        fake.finish(job.job_id)
    fake.calls.clear()
    run_cycles(driver)
    assert len(fake.calls) <= 2  # the poll, and at most one sacct
    service.close()


def test_restart_takes_everything_up_again(tmp_path: Path) -> None:
    sites = Sites("vu", nodes=6)
    fake = sites.fakes["vu"]
    alice = _submit(fake, "alice", 1, 6, 1, sub="a1")
    service, driver = _open(tmp_path, sites)
    run_cycles(driver, 3)
    assert len(alice.nodes) == 6
    waiting = _submit(fake, "bob", 6, 6, 6, sub="b1")  # cannot fit: waits held
    run_cycles(driver)
    before = {k: (r.state, r.cluster) for k, r in service.manager.records.items()}
    service.store.close()  # as after SIGKILL: nothing else is flushed or closed
    service, driver = _open(tmp_path, sites)
    assert {k: (r.state, r.cluster) for k, r in service.manager.records.items()} == before
    assert service.manager.waiting_ids() == ["bob:b1"]
    fake.calls.clear()
    run_cycles(driver, 2)
    assert not any(c[0] in ("sbatch", "scancel") for c in fake.calls)
    fake.finish(alice.job_id)
    run_cycles(driver, 2)  # alice ended: bob's copy is released at 6
    assert waiting.state == "RUNNING"
    assert service.manager.records["alice:a1"].state.finished
    service.close()


def test_cancelled_waiting_job_leaves_the_queue(tmp_path: Path) -> None:
    sites = Sites("vu", nodes=2)
    fake = sites.fakes["vu"]
    fake.add_job(2, "", user="carol")
    alice = _submit(fake, "alice", 2, 2, 2, sub="z")
    service, driver = _open(tmp_path, sites)
    run_cycles(driver)
    assert service.manager.waiting_ids() == ["alice:z"]
    fake.finish(alice.job_id, "CANCELLED")
    run_cycles(driver)
    assert service.manager.waiting_ids() == []
    assert service.manager.records["alice:z"].state.value == "cancelled"
    service.close()


def test_status_and_metrics_show_jobs_and_resizes(tmp_path: Path) -> None:
    sites = Sites("vu")
    alice = _submit(sites.fakes["vu"], "alice", 1, 4, 1, sub="m")
    service, driver = _open(tmp_path, sites)
    run_cycles(driver, 3)
    status = service.status()
    assert status["policy"]["name"] == "fpsma" and status["cycles"] == 3
    assert status["sites"][0]["online"] is True and status["sites"][0]["kind"] == "slurm"
    [job] = status["jobs"]
    assert job == {"id": "alice:m", "user": "alice", "state": "running", "site": "vu",
                   "native_id": alice.job_id, "size": 4, "min": 1, "max": 4, "copies": [],
                   "resizes": 1}
    text = generate_latest(service.metrics.registry).decode()
    assert 'malleable_resizes_total{kind="grow",outcome="done"} 1.0' in text
    assert "malleable_placements_total 1.0" in text
    assert 'malleable_managed_jobs{state="running"} 1.0' in text
    assert 'malleable_site_up{site="vu"} 1.0' in text
    assert "malleable_cycle_seconds_count 3.0" in text
    assert "process_resident_memory_bytes " in text  # the service's RSS, to watch over months
    assert service.config.status_path.exists()
    service.close()


def test_an_mpi_job_without_its_channel_is_not_resized(tmp_path: Path,
                                                        caplog: pytest.LogCaptureFixture
                                                        ) -> None:
    sites = Sites("vu")
    fake = sites.fakes["vu"]
    comment = tags.encode(tags.UserTag(1, 4, mpi=True), "alice")
    alice = fake.add_job(1, comment, name="jacobi", user="alice", held=True)
    caplog.set_level(logging.WARNING, "malleable.site.adapter")
    service, driver = _open(tmp_path, sites)
    run_cycles(driver, 4)  # placed and followed; FPSMA would grow it into the idle nodes
    negotiations = service.adapters["vu"].negotiations
    assert negotiations is not None and negotiations.wait(5.0) == []  # answered in a worker
    assert alice.state == "RUNNING" and len(alice.nodes) == 1
    assert not any("expand" in " ".join(c) for c in fake.calls)
    lines = [r.getMessage() for r in caplog.records if "event=mpi_no_channel" in r.getMessage()]
    assert len(lines) == 1 and f"slurm_id={alice.job_id}" in lines[0]
    service.close()


def test_a_job_waiting_on_a_full_site_shrinks_jobs_there_not_elsewhere(
        tmp_path: Path) -> None:
    """The testbed's scenario: vu full (alice 3 + carol's rigid 1), uva half empty; bob's
    new job has its only copy on vu. One decision over both sites chose uva (worst fit),
    could not go there and shrank nothing; site by site, alice is shrunk on vu."""
    sites = Sites("vu", "uva", nodes=4)
    vu, uva = sites.fakes["vu"], sites.fakes["uva"]
    vu.add_job(1, "", name="rigid", user="carol")
    alice = _submit(vu, "alice", 1, 3, 1)
    bob = _submit(uva, "bob", 1, 2, 1)
    service, driver = _open(tmp_path, sites, approach="pwa")
    run_cycles(driver, 4)
    assert (len(alice.nodes), len(bob.nodes)) == (3, 2)
    service.close()
    service, driver = _open(tmp_path, sites, approach="pwa")  # a restart, as on the testbed
    bob2 = _submit(vu, "bob", 1, 1, 1)
    run_cycles(driver, 4)
    assert bob2.state == "RUNNING" and len(alice.nodes) == 2 and len(bob.nodes) == 2
    service.close()


def test_ended_jobs_are_forgotten_past_a_bounded_number(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """A long run keeps O(live jobs) per-job state: ended jobs beyond the kept few and
    histories beyond their bound are dropped (the journal still has everything)."""
    import malleable.site.daemon as daemon

    monkeypatch.setattr(daemon, "KEEP_FINISHED_JOBS", 4)
    monkeypatch.setattr(daemon, "KEEP_HISTORY", 3)
    sites = Sites("vu", nodes=6)
    service, driver = _open(tmp_path, sites)
    fake = sites.fakes["vu"]
    adapter = service.adapters["vu"]
    for n in range(30):
        _submit(fake, "bob", 1, 3, 1, sub=f"e{n}")
        run_cycles(driver, 2)
        for job in [j for j in fake.jobs.values() if j.user == "bob" and j.state == "RUNNING"]:
            if job.job_id % 3 != 0:
                fake.finish(job.job_id)
        for job_id in [j for j, job in fake.jobs.items() if job.state == "COMPLETED"]:
            del fake.jobs[job_id]  # Slurm forgets ended jobs
    run_cycles(driver, 2)
    live = service.manager.unfinished
    ended = [r for r in service.manager.records.values() if r.state.finished]
    assert len(ended) == 4 and live + 4 == len(service.manager.records)
    assert len(adapter.cluster._mine) <= live + 4 and len(adapter.cluster._by_slurm) <= live + 4
    assert len(service.status()["jobs"]) == live + 4
    assert len(service.manager.operations) <= 2 * 3
    assert len(adapter.resizes) <= 2 * 3
    assert len(service.store.submitted()) == 30  # the journal keeps them all
    assert sum(service.metrics.resizes.labels(kind=k, outcome="done")._value.get()
               for k in ("grow", "shrink")) > 3  # resizes happened and were counted


def test_a_dead_node_is_shed_and_forgotten_with_its_job(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """The service sheds a dead node from under a user's job, as `manager run` does, and
    remembers it while the job is kept; once the ended job is forgotten, so are its
    failures (the journal keeps them)."""
    import malleable.site.daemon as daemon

    monkeypatch.setattr(daemon, "KEEP_FINISHED_JOBS", 0)
    sites = Sites("vu", nodes=6)
    service, driver = _open(tmp_path, sites)
    fake = sites.fakes["vu"]
    adapter = service.adapters["vu"]
    alice = _submit(fake, "alice", 2, 6, 2)
    run_cycles(driver, 3)
    assert len(alice.nodes) == 6
    dead = alice.nodes[3]
    fake.dead = {dead}
    run_cycles(driver)  # shed: the job goes on without it
    assert [e["dead"] for e in adapter.node_failures] == [dead]
    assert dead not in alice.nodes and alice.state == "RUNNING"
    assert adapter.cluster._lost == {(alice.job_id, dead)}
    fake.dead = set()
    fake.finish(alice.job_id)
    del fake.jobs[alice.job_id]
    run_cycles(driver, 2)
    assert service.manager.records == {}
    assert adapter.node_failures == [] and adapter.cluster._lost == set()
    assert [e["dead"] for e in service.store.node_failures("vu")] == [dead]
    service.close()


def test_an_mpi_job_on_a_dead_node_is_left_to_slurm(tmp_path: Path) -> None:
    """An --mpi job's ranks on a dead node are gone: shrinking the allocation under the
    program would not save it, so the service does not touch it (Slurm ends it)."""
    sites = Sites("vu")
    fake = sites.fakes["vu"]
    comment = tags.encode(tags.UserTag(2, 4, mpi=True), "alice")
    alice = fake.add_job(3, comment, name="jacobi", user="alice", held=True)
    service, driver = _open(tmp_path, sites)
    run_cycles(driver, 2)
    assert alice.state == "RUNNING" and len(alice.nodes) == 3
    fake.dead = {alice.nodes[2]}
    fake.calls.clear()
    run_cycles(driver)
    adapter = service.adapters["vu"]
    assert [(e["action"], e["reason"]) for e in adapter.node_failures] == [
        ("none", "an --mpi job lost ranks with the node: Slurm ends it NODE_FAIL")]
    assert len(alice.nodes) == 3 and _touched(fake, alice.job_id) == []
    service.close()


def test_a_reload_adds_a_site_that_is_placed_on_and_removes_one_no_longer_polled(
        tmp_path: Path) -> None:
    sites = Sites("a", "b", nodes=4)
    state = tmp_path / "state.sqlite"
    service = open_service(_config(tmp_path, ("a",)), sites.ctl)  # type: ignore[arg-type]
    driver = driver_for(service)
    sites.fakes["a"].add_job(4, "", user="carol")  # a is full: nothing is placed there
    job = _submit(sites.fakes["b"], "alice", 2, 2, 2)
    run_cycles(driver)
    assert sites.fakes["b"].calls == [] and job.state == "PENDING"
    (tmp_path / "manager.toml").write_text(
        f'[service]\nstate = "{state}"\npoll = 1.0\n'
        '[policy]\nname = "fpsma"\n[clusters.a]\n[clusters.b]\n')
    assert service.reload(driver)
    run_cycles(driver, 2)
    assert job.state == "RUNNING" and service.manager.cluster_of(
        f"alice:b.{job.job_id}") == "b"
    (tmp_path / "manager.toml").write_text(
        f'[service]\nstate = "{state}"\npoll = 1.0\n'
        '[policy]\nname = "fpsma"\n[clusters.b]\n')
    assert service.reload(driver)
    polled = len(sites.fakes["a"].calls)
    run_cycles(driver, 2)
    assert sites.fakes["a"].calls[polled:] == []
    assert service.manager.sites() == ["b"] and list(driver.manager.clusters) == ["b"]
    assert [s["name"] for s in service.status()["sites"]] == ["b"]
    service.close()
