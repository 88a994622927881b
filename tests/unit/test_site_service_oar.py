"""The site service on the fake OAR (and with the fake Slurm beside it): users' held tagged
jobs resumed as ``oar`` through sudo, copies deleted, honest end states, bad tags logged
once, untagged jobs left alone, no resize offered on OAR without the job's agent, one poll
per cycle, restart."""

from __future__ import annotations

import logging
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from malleable.adapters.oar.ctl import OarCtl
from malleable.adapters.slurm.ctl import SlurmCtl
from malleable.commands.serve import _print_status
from malleable.config import SiteConfig
from malleable.errors import InputError
from malleable.model import JobState
from malleable.resources import Capability
from malleable.site import tag as tags
from malleable.site.assembly import make_adapter
from malleable.site.daemon import SiteService
from malleable.site.driver import ServiceDriver
from malleable.site.oarsite import SiteOar
from tests.fakes.oar import FakeOar, FakeOarJob
from tests.fakes.service_config import ACCOUNT, open_quick, run_cycles, service_config
from tests.fakes.slurm import FakeJob, FakeSlurm, node_names

SUDO = ["sudo", "-n", "-u", "oar"]


class Sites:
    """A fake OAR or Slurm per site; the service's commands go to them as `malleable`."""

    def __init__(self, oar: tuple[str, ...] = ("grid",), slurm: tuple[str, ...] = (),
                 nodes: int = 4) -> None:
        self.oar = {n: FakeOar([f"{n}-n{i}" for i in range(1, nodes + 1)]) for n in oar}
        self.slurm = {n: FakeSlurm(node_names(nodes), admin_levels={ACCOUNT: "Operator"})
                      for n in slurm}

    def ctl(self, site: SiteConfig) -> SlurmCtl | OarCtl:
        if site.name in self.oar:
            return OarCtl(self.oar[site.name])
        return SlurmCtl(self.slurm[site.name], user=ACCOUNT)

    def config(self, tmp_path: Path, approach: str = "pra", channel: str = "") -> Any:
        return service_config(tmp_path, self.oar, self.slurm, approach, channel)


def _open(tmp_path: Path, sites: Sites, **kw: str) -> tuple[SiteService, ServiceDriver]:
    return open_quick(sites.config(tmp_path, **kw), sites.ctl)


def _submit(fake: FakeOar, user: str, low: int, high: int, nodes: int, sub: str | None = None,
            held: bool = True, name: str | None = None) -> FakeOarJob:
    """``oarsub --hold -n TAG`` as ``user`` (what ``malleable submit`` runs)."""
    fake.user = user
    try:
        name = name if name is not None else tags.encode_oar(tags.UserTag(low, high, sub=sub))
        hold = ["--hold"] if held else []
        (job_id,) = OarCtl(fake).submit([*hold, "-n", name, "-l", f"nodes={nodes}"],
                                        "sleep 600")
    finally:
        fake.user = ACCOUNT
    return fake.jobs[job_id]


def _touched(fake: FakeOar, oar_id: int) -> list[list[str]]:
    """Commands other than the poll and read-backs that named ``oar_id``."""
    return [c for c in fake.calls if str(oar_id) in c and c[:2] != ["oarstat", "-fJ"]]


def _slurm_submit(fake: FakeSlurm, user: str, low: int, high: int, nodes: int,
                  sub: str) -> FakeJob:
    return fake.add_job(nodes, tags.encode(tags.UserTag(low, high, sub=sub), user), name="app",
                        user=user, held=True)


def test_alice_s_held_job_is_resumed_as_oar_and_bob_s_job_left_alone(tmp_path: Path) -> None:
    sites = Sites()
    fake = sites.oar["grid"]
    fake.user = "bob"
    bob = fake.add_job(1, name="plain")
    fake.user = ACCOUNT
    alice = _submit(fake, "alice", 1, 4, 2, sub="a1")
    assert alice.state == "Hold"
    service, driver = _open(tmp_path, sites)
    adapter = service.adapters["grid"]
    assert isinstance(adapter, SiteOar)
    assert adapter.capabilities == {Capability.EXPAND, Capability.SHRINK}
    run_cycles(driver)
    assert [*SUDO, "oarresume", str(alice.job_id)] in fake.calls
    assert alice.state == "Running" and len(alice.nodes) == 2
    assert alice.events == ["RESUME_JOB"]
    run_cycles(driver, 2)
    record = service.manager.records["alice:a1"]
    assert record.state is JobState.RUNNING and record.spec.user == "alice"
    assert service.manager.cluster_of("alice:a1") == "grid"
    assert _touched(fake, bob.job_id) == [] and bob.state == "Running"
    fake.finish(alice.job_id)
    run_cycles(driver, 2)
    assert record.state is JobState.COMPLETED
    assert service.status()["jobs"][0]["native_id"] == alice.job_id
    service.close()


def test_without_its_agent_nothing_offers_a_resize_on_oar(tmp_path: Path) -> None:
    """Grow and shrink need the user's agent (none connected here): the policy sees the
    job rigid (tests/unit/test_site_oar_resize.py: with the agent)."""
    sites = Sites(nodes=6)
    fake = sites.oar["grid"]
    alice = _submit(fake, "alice", 1, 6, 1, sub="a1")
    service, driver = _open(tmp_path, sites)
    run_cycles(driver, 4)
    assert alice.state == "Running" and len(alice.nodes) == 1
    view = service.adapters["grid"].observe()
    (job,) = view.running.values()
    assert (job.managed, job.size, job.can_grow, job.can_shrink) == (True, 1, False, False)
    assert service.manager.records["alice:a1"].spec.max_size == 6  # the user's range, kept
    assert {op.kind for op in service.manager.operations} == {"place"}
    assert not any(c[:2] == ["oarsub", "-J"] for c in fake.calls[1:])
    assert not any(c[:3] == ["sh", "-c", 'mkdir -p "$(dirname "$1")" && cat > "$1"']
                   for c in fake.calls)  # the service writes no file
    adapter = service.adapters["grid"]
    assert adapter.offer_grow("alice:a1", 3) == 0
    assert adapter.request_shrink("alice:a1", 1, True) == 0
    service.close()


def test_a_held_job_starts_at_its_submitted_size_once_it_fits(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    sites = Sites()
    fake = sites.oar["grid"]
    fake.user = "carol"
    carol = fake.add_job(2, name="rigid")
    fake.user = ACCOUNT
    alice = _submit(fake, "alice", 1, 4, 3, sub="a1")  # OAR cannot start it at 2
    service, driver = _open(tmp_path, sites)
    with caplog.at_level(logging.INFO):
        run_cycles(driver, 3)
    assert alice.state == "Hold" and _touched(fake, alice.job_id) == []
    deferred = [r for r in caplog.records if "event=place_deferred" in r.getMessage()]
    assert len(deferred) == 1 and "its 3 submitted nodes; 2 offered" in deferred[0].getMessage()
    fake.finish(carol.job_id)
    run_cycles(driver, 2)
    assert alice.state == "Running" and len(alice.nodes) == 3
    assert service.manager.records["alice:a1"].sizes[-1][1] == 3
    service.close()


def test_a_copy_on_another_oar_site_is_deleted_as_oar(tmp_path: Path) -> None:
    sites = Sites(oar=("grid", "lab"))
    sites.oar["grid"].add_job(3, name="busy")
    first = _submit(sites.oar["grid"], "alice", 1, 2, 1, sub="s1")
    second = _submit(sites.oar["lab"], "alice", 1, 2, 1, sub="s1")
    service, driver = _open(tmp_path, sites)
    run_cycles(driver, 2)
    assert service.manager.cluster_of("alice:s1") == "lab"
    assert second.state == "Running"
    assert [*SUDO, "oardel", str(first.job_id)] in sites.oar["grid"].calls
    assert first.state == "Error" and first.events == ["FRAG_JOB_REQUEST"]
    run_cycles(driver, 2)
    assert service.manager.records["alice:s1"].state is JobState.RUNNING
    service.close()


def test_a_deleted_copy_oar_still_lists_is_not_deleted_again(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """OAR lists a deleted held job (still ``Hold``) a while; the service deleted it again
    at its next poll and logged ``copy_cancel_failed`` (seen on das3-mixed)."""
    sites = Sites(oar=("grid", "lab"))
    sites.oar["lab"].finishing = 4  # commands: about as many cycles
    first = _submit(sites.oar["grid"], "alice", 1, 2, 1, sub="s1")
    second = _submit(sites.oar["lab"], "alice", 1, 2, 1, sub="s1")
    service, driver = _open(tmp_path, sites)
    with caplog.at_level(logging.INFO, "malleable.site"):
        run_cycles(driver, 2)
        assert service.manager.cluster_of("alice:s1") == "grid" and first.state == "Running"
        assert second.state == "Hold" and second.fragged  # deleted, still listed
        run_cycles(driver, 6)
    deletes = [c for c in sites.oar["lab"].calls if c[:5] == [*SUDO, "oardel"]]
    assert deletes == [[*SUDO, "oardel", str(second.job_id)]]
    assert second.state == "Error" and second.events == ["FRAG_JOB_REQUEST"]
    lines = [r.getMessage() for r in caplog.records]
    assert sum("event=copy_cancel " in line for line in lines) == 1, lines
    assert not any("copy_cancel_failed" in line for line in lines)
    assert service.manager.records["alice:s1"].state is JobState.RUNNING
    service.close()


@pytest.mark.parametrize("busy", ["vu", "grid"])
def test_a_mixed_service_places_one_copy_and_cancels_the_other(tmp_path: Path,
                                                               busy: str) -> None:
    sites = Sites(oar=("grid",), slurm=("vu",))
    if busy == "vu":
        sites.slurm["vu"].add_job(3, "", user="carol")
    else:
        sites.oar["grid"].add_job(3, name="busy")
    on_oar = _submit(sites.oar["grid"], "alice", 1, 2, 1, sub="m1")
    on_slurm = _slurm_submit(sites.slurm["vu"], "alice", 1, 2, 1, sub="m1")
    service, driver = _open(tmp_path, sites)
    run_cycles(driver, 3)
    if busy == "vu":
        assert service.manager.cluster_of("alice:m1") == "grid"
        assert on_oar.state == "Running" and on_slurm.state == "CANCELLED"
    else:
        assert service.manager.cluster_of("alice:m1") == "vu"
        assert on_slurm.state == "RUNNING"
        assert on_oar.state == "Error" and on_oar.events == ["FRAG_JOB_REQUEST"]
    status = service.status()
    assert [s["name"] for s in status["sites"]] == ["grid", "vu"]
    assert all(s["online"] for s in status["sites"])
    service.close()


def test_an_oar_copy_announced_by_n_is_awaited_though_the_slurm_copy_came_first(
        tmp_path: Path) -> None:
    """test_mixed_serve's race on fakes: vu's copy is found one poll before grid's."""
    sites = Sites(oar=("grid",), slurm=("vu",))
    sites.slurm["vu"].add_job(3, "", user="carol")  # vu 1 free node, grid 4
    tag = tags.UserTag(1, 2, sub="m1", copies=2)
    on_slurm = sites.slurm["vu"].add_job(1, tags.encode(tag, "alice"), name="app",
                                         user="alice", held=True)
    service, driver = _open(tmp_path, sites)
    run_cycles(driver)
    assert on_slurm.state == "PENDING" and service.manager.waiting == 1
    on_oar = _submit(sites.oar["grid"], "alice", 1, 2, 1, name=tags.encode_oar(tag))
    assert on_oar.name.endswith(";sub=m1;n=2")
    run_cycles(driver, 3)
    assert service.manager.cluster_of("alice:m1") == "grid"
    assert on_oar.state == "Running" and on_slurm.state == "CANCELLED"
    service.close()


def test_bad_and_forged_tags_are_logged_once_and_never_acted_on(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    sites = Sites()
    fake = sites.oar["grid"]
    bad = _submit(fake, "bob", 0, 0, 1, name="m1;min=3;max=2")
    forged = _submit(fake, "bob", 0, 0, 1, name="m1;min=1;max=4;user=alice")
    junk = _submit(fake, "bob", 0, 0, 1, name="m1;" + "x" * 90)
    mine = _submit(fake, ACCOUNT, 1, 1, 1, sub="own")  # the service's account: not a user's
    service, driver = _open(tmp_path, sites)
    with caplog.at_level(logging.WARNING):
        run_cycles(driver, 3)
    ignored = [r.getMessage() for r in caplog.records if "event=tag_ignored" in r.getMessage()]
    assert sorted(int(m.split("oar_id=")[1].split()[0]) for m in ignored) == \
        [bad.job_id, forged.job_id, junk.job_id]
    for job in (bad, forged, junk, mine):
        assert job.state == "Hold" and _touched(fake, job.job_id) == []
    assert service.manager.records == {}
    assert service.status()["sites"][0]["ignored_tags"] == 3
    fake.user = "bob"
    OarCtl(fake).delete([bad.job_id])  # gone from the queue: its refusal is forgotten
    fake.user = ACCOUNT
    run_cycles(driver)
    assert sorted(service.adapters["grid"].ignored) == [forged.job_id, junk.job_id]
    service.close()


def test_a_job_its_user_deletes_ends_cancelled_and_one_that_fails_failed(
        tmp_path: Path) -> None:
    sites = Sites()
    fake = sites.oar["grid"]
    first = _submit(fake, "alice", 1, 2, 1, sub="a1")
    second = _submit(fake, "bob", 1, 2, 1, sub="b1")
    service, driver = _open(tmp_path, sites)
    run_cycles(driver, 2)
    assert first.state == second.state == "Running"
    fake.user = "alice"
    assert OarCtl(fake).delete([first.job_id]).rc == 0  # her own oardel, after the resume
    fake.user = ACCOUNT
    fake.finish(second.job_id, exit_code=1)
    run_cycles(driver, 2)
    assert first.events == ["RESUME_JOB", "FRAG_JOB_REQUEST"]
    assert service.manager.records["alice:a1"].state is JobState.CANCELLED
    assert service.manager.records["bob:b1"].state is JobState.FAILED
    service.close()


def test_a_held_job_its_user_deletes_leaves_the_queue(tmp_path: Path) -> None:
    sites = Sites()
    fake = sites.oar["grid"]
    fake.add_job(4, name="busy")
    alice = _submit(fake, "alice", 2, 2, 2, sub="a1")
    service, driver = _open(tmp_path, sites)
    run_cycles(driver, 2)
    assert service.manager.waiting_ids() == ["alice:a1"]
    fake.user = "alice"
    OarCtl(fake).delete([alice.job_id])
    fake.user = ACCOUNT
    run_cycles(driver)
    assert service.manager.waiting_ids() == []
    service.close()


def test_without_the_sudo_rule_nothing_is_resumed(tmp_path: Path,
                                                  caplog: pytest.LogCaptureFixture) -> None:
    sites = Sites()
    fake = sites.oar["grid"]
    fake.sudoers = set()
    alice = _submit(fake, "alice", 1, 2, 1, sub="a1")
    service, driver = _open(tmp_path, sites)
    with caplog.at_level(logging.WARNING):
        run_cycles(driver, 2)
    assert alice.state == "Hold"
    refused = [r.getMessage() for r in caplog.records if "event=place_refused" in r.getMessage()]
    assert refused and "a password is required" in refused[0]
    assert service.manager.waiting_ids() == ["alice:a1"]
    service.close()


def test_the_fake_refuses_another_user_s_job_without_sudo() -> None:
    """What the sudo rule is for (the messages recorded on the testbed)."""
    fake = FakeOar(["n1"])
    alice = _submit(fake, "alice", 1, 1, 1)
    resume = OarCtl(fake).resume(alice.job_id)
    assert resume.stdout == f"Cannot resume {alice.job_id} : you are not the right user.\n"
    delete = OarCtl(fake).delete([alice.job_id])
    assert "You are not the right user" in delete.stdout and alice.state == "Hold"
    fake.user = "alice"
    assert OarCtl(fake).via_sudo("oar").resume(alice.job_id).rc == 1  # not in the rule


def test_polls_are_bounded_whatever_the_number_of_jobs(tmp_path: Path) -> None:
    sites = Sites(nodes=200)
    fake = sites.oar["grid"]
    for i in range(50):
        fake.add_job(1, name=f"bg{i}")
    for i in range(60):
        _submit(fake, "alice", 2, 2, 2, sub=f"a{i}")
    service, driver = _open(tmp_path, sites)
    run_cycles(driver, 2)
    assert service.manager.unfinished == 60
    fake.calls.clear()
    run_cycles(driver, 4)
    assert len(fake.calls) == 4  # one poll (oarnodes -J and oarstat -J) per cycle
    service.close()


def test_restart_takes_the_oar_jobs_up_again(tmp_path: Path) -> None:
    sites = Sites()
    fake = sites.oar["grid"]
    alice = _submit(fake, "alice", 1, 2, 1, sub="a1")
    fake.add_job(3, name="busy")
    bob = _submit(fake, "bob", 2, 2, 2, sub="b1")  # cannot fit: waits held
    service, driver = _open(tmp_path, sites)
    run_cycles(driver, 2)
    assert alice.state == "Running" and bob.state == "Hold"
    service.store.close()  # as after SIGKILL
    service, driver = _open(tmp_path, sites)
    assert service.manager.cluster_of("alice:a1") == "grid"
    assert service.manager.waiting_ids() == ["bob:b1"]
    fake.calls.clear()
    run_cycles(driver, 2)
    assert not any(c[:4] == SUDO for c in fake.calls)
    fake.finish(alice.job_id)
    run_cycles(driver, 2)
    assert service.manager.records["alice:a1"].state is JobState.COMPLETED
    service.close()


def test_another_kind_is_refused(tmp_path: Path) -> None:
    sites = Sites()
    config = sites.config(tmp_path)
    site = config.clusters.sites[0]
    service, _ = _open(tmp_path, sites)
    with pytest.raises(InputError, match="drives Slurm and OAR sites, not 'pbs'"):
        make_adapter(replace(site, kind="pbs"), service.clock, service.info, service.store,
                     sites.ctl)
    with pytest.raises(TypeError, match="an OAR site needs OAR commands"):
        make_adapter(site, service.clock, service.info, service.store,
                     lambda s: SlurmCtl(FakeSlurm(node_names(1))))
    service.close()


def test_copies_with_the_same_oar_id_on_two_sites_are_told_apart(tmp_path: Path) -> None:
    """OAR numbers jobs per site: the copy on lab may have the id of the one placed on grid
    (seen on the testbed: the lab copy was left held)."""
    sites = Sites(oar=("grid", "lab"))
    first = _submit(sites.oar["grid"], "alice", 1, 2, 1, sub="s1")
    second = _submit(sites.oar["lab"], "alice", 1, 2, 1, sub="s1")
    assert first.job_id == second.job_id
    service, driver = _open(tmp_path, sites)
    run_cycles(driver, 2)
    assert service.manager.cluster_of("alice:s1") == "grid" and first.state == "Running"
    assert second.state == "Error" and second.events == ["FRAG_JOB_REQUEST"]
    service.close()


def test_a_second_running_copy_with_the_same_id_is_logged_once_and_left_alone(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    sites = Sites(oar=("grid", "lab"))
    copies = [_submit(sites.oar[s], "alice", 1, 2, 1, sub="s1") for s in ("grid", "lab")]
    for site, job in zip(("grid", "lab"), copies, strict=True):
        fake = sites.oar[site]
        fake.user = "alice"
        assert OarCtl(fake).resume(job.job_id).rc == 0  # she resumes both herself
        fake.user = ACCOUNT
    service, driver = _open(tmp_path, sites)
    with caplog.at_level(logging.WARNING):
        run_cycles(driver, 3)
    duplicates = [r.getMessage() for r in caplog.records if "event=duplicate" in r.getMessage()]
    assert len(duplicates) == 1 and f"site=lab oar_id={copies[1].job_id} " in duplicates[0]
    assert all(job.state == "Running" for job in copies)
    assert service.manager.cluster_of("alice:s1") == "grid"
    service.close()


def test_log_lines_and_status_name_a_job_s_id_by_its_site_s_kind(
        tmp_path: Path, caplog: pytest.LogCaptureFixture,
        capsys: pytest.CaptureFixture[str]) -> None:
    """``oar_id=`` on an OAR site, ``slurm_id=`` on a Slurm one (the daemon's and the
    channel's lines too, which said ``slurm_id=`` for OAR jobs); the status says each
    site's kind and each job's ``native_id``."""
    sites = Sites(oar=("grid",), slurm=("vu",))
    on_grid = _submit(sites.oar["grid"], "alice", 1, 2, 1, sub="k1")
    on_vu = _slurm_submit(sites.slurm["vu"], "alice", 1, 2, 1, sub="k1")
    service, driver = _open(tmp_path, sites, channel="127.0.0.1:0")
    with caplog.at_level(logging.INFO, "malleable.site"):
        run_cycles(driver, 3)
    lines = [r.getMessage() for r in caplog.records if "event=" in r.getMessage()]
    assert any(f"event=adopted job=alice:k1 user=alice site=grid oar_id={on_grid.job_id} "
               "state=waiting" in line for line in lines), lines  # seen first on grid
    placed = service.manager.cluster_of("alice:k1")
    assert placed == "grid"  # the first site of the config, the first of the PRA's WF ties
    assert any(f"event=copy_cancel job=alice:k1 site=vu slurm_id={on_vu.job_id} "
               "placed_on=grid" in line for line in lines), lines
    assert not any("site=grid slurm_id=" in line for line in lines), lines
    assert (service.id_key("grid"), service.id_key("vu"), service.id_key("gone")) == \
        ("oar_id", "slurm_id", "native_id")
    assert service.channel is not None and service.channel.id_key("grid") == "oar_id"
    status = service.status()
    assert {s["name"]: s["kind"] for s in status["sites"]} == {"grid": "oar", "vu": "slurm"}
    [job] = status["jobs"]
    assert (job["site"], job["native_id"]) == (placed, service.adapters[placed].native_id(
        "alice:k1")) and "slurm_id" not in job
    service.close()
    _print_status({**status, "running": True, "stale": False, "pending_resizes": []})
    shown = capsys.readouterr().out
    assert f"job alice:k1: running, 1 nodes in [1, 2], grid, OAR job {on_grid.job_id}\n" in shown
    older = {**status, "running": False, "stale": True, "pending_resizes": [],
             "sites": [{k: v for k, v in s.items() if k != "kind"} for s in status["sites"]],
             "jobs": [{**{k: v for k, v in job.items() if k != "native_id"},
                       "slurm_id": on_grid.job_id}]}
    _print_status(older)  # the status file of a service older than native_id
    assert f"grid #{on_grid.job_id}\n" in capsys.readouterr().out
