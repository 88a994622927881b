"""The site service finishes, after a restart, what an intent left half done.

The service is killed at an intent's journal boundary (a cancel, the helper allocation of
an expansion, its hand-over), then a new service opens the same journal over the same
fake Slurm site (a restart of ``manager serve``). As in tests/unit/test_intents.py (the
plain adapter's), a kill is stood in for by an exception raised where ``faults.reached``
would SIGKILL the process: the journal is left as a kill leaves it, the fake site keeps
what it was told. The service's expansions run in workers; to be killed in the test's
thread, the service before the kill answers at once (no negotiations).
"""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from malleable import faults
from malleable.adapters.oar.ctl import OarCtl
from malleable.adapters.slurm.ctl import SlurmCtl
from malleable.config import SiteConfig
from malleable.model import JobState, View
from malleable.policies.protocol import Decision
from malleable.site import tag as tags
from malleable.site.adapter import SiteSlurm
from malleable.site.assembly import open_service
from malleable.site.config import parse_service_config
from malleable.site.daemon import SiteService
from malleable.site.driver import ServiceDriver, driver_for
from tests.fakes.oar import FakeOar
from tests.fakes.service_config import open_quick, run_cycles, service_config
from tests.fakes.slurm import FakeJob, FakeSlurm, node_names

ACCOUNT = "malleable"
JOB = "alice:a1"


class Killed(BaseException):
    """Where the real hook would SIGKILL the service."""


def _kill_at(monkeypatch: pytest.MonkeyPatch, boundary: str) -> None:
    def reached(name: str) -> None:
        if name == boundary:
            raise Killed(name)

    monkeypatch.setattr(faults, "reached", reached)


def _open(tmp_path: Path, fake: FakeSlurm) -> tuple[SiteService, ServiceDriver]:
    doc = {"service": {"state": str(tmp_path / "state.sqlite"), "poll": 1.0},
           "policy": {"name": "fpsma", "options": {"approach": "pra"}},
           "clusters": {"vu": {}}}
    config = parse_service_config(doc, str(tmp_path / "manager.toml"), tmp_path)

    def ctl(site: SiteConfig) -> SlurmCtl:
        return SlurmCtl(fake, user=ACCOUNT)

    return open_quick(config, ctl)


def _site(service: SiteService) -> SiteSlurm:
    site = service.adapters["vu"]
    assert isinstance(site, SiteSlurm)
    return site


def _placed(tmp_path: Path, fake: FakeSlurm) -> tuple[SiteService, SiteSlurm, FakeJob]:
    """Alice's 1..4 job placed at 1 node, followed as running; the site answers at once."""
    alice = fake.add_job(1, tags.encode(tags.UserTag(1, 4, sub="a1"), "alice"), name="app",
                         user="alice", held=True)
    carol = fake.add_job(7, "", name="rigid", user="carol")  # one node left for alice
    service, driver = _open(tmp_path, fake)
    run_cycles(driver)  # discovered and released at 1 node
    fake.finish(carol.job_id)  # room for a grow, which only the test asks for
    service.manager.set_policy(Idle())  # (the policy decides nothing from now on)
    site = _site(service)
    site.refresh()  # the adapter sees alice running
    assert alice.state == "RUNNING" and site.size_of(JOB) == 1
    site.cluster.negotiations = None  # resizes answered in this thread, to be killed here
    return service, site, alice


def _killed_then_restarted(tmp_path: Path, fake: FakeSlurm, service: SiteService,
                           monkeypatch: pytest.MonkeyPatch) -> tuple[SiteService, ServiceDriver]:
    monkeypatch.setattr(faults, "reached", lambda name: None)
    left = [i.token for i in service.store.intents("open")]  # journaled, never closed
    assert left, "the kill came before any intent was journaled"
    service.store.close()  # as after SIGKILL: nothing else is flushed or closed
    again, driver = _open(tmp_path, fake)
    assert [i.token for i in again.store.intents("open")] == left
    return again, driver


def _closed(service: SiteService, kind: str) -> str:
    assert service.store.intents("open") == [], "an intent is still open after the restart"
    return [i.state for i in service.store.intents(None) if i.kind == kind][-1]


def test_a_cancel_cut_short_is_carried_out_after_the_restart(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeSlurm(node_names(8), admin_levels={ACCOUNT: "Operator"})
    service, site, alice = _placed(tmp_path, fake)
    _kill_at(monkeypatch, "cancel.before")
    with pytest.raises(Killed):
        site.cancel(JOB)
    assert alice.state == "RUNNING"

    again, driver = _killed_then_restarted(tmp_path, fake, service, monkeypatch)
    run_cycles(driver, 2)  # the first poll cancels it, the next sees it ended
    assert alice.state == "CANCELLED"
    assert _closed(again, "cancel") == "done"
    assert again.manager.records[JOB].state is JobState.CANCELLED
    again.close()


def test_a_helper_granted_before_the_kill_is_rolled_back_after_the_restart(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeSlurm(node_names(8), admin_levels={ACCOUNT: "Operator"})
    service, site, alice = _placed(tmp_path, fake)
    _kill_at(monkeypatch, "helper.granted")
    with pytest.raises(Killed):
        site.offer_grow(JOB, 2)
    (helper,) = [j for j in fake.jobs.values() if j.expand_of == alice.job_id]
    assert helper.state == "RUNNING"  # its nodes are held, not given to alice

    again, driver = _killed_then_restarted(tmp_path, fake, service, monkeypatch)
    again.manager.set_policy(Idle())
    run_cycles(driver, 2)
    assert helper.state == "CANCELLED" and len(alice.nodes) == 1
    assert ["scancel", str(helper.job_id)] in fake.calls
    assert _closed(again, "helper") == "rolled back"
    again.close()


def test_a_handover_cut_short_is_finished_after_the_restart(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        caplog: pytest.LogCaptureFixture) -> None:
    fake = FakeSlurm(node_names(8), admin_levels={ACCOUNT: "Operator"})
    service, site, alice = _placed(tmp_path, fake)
    _kill_at(monkeypatch, "handover.given")
    with pytest.raises(Killed):
        site.offer_grow(JOB, 2)
    assert len(alice.given) == 2 and len(alice.nodes) == 1  # given, not taken up

    again, driver = _killed_then_restarted(tmp_path, fake, service, monkeypatch)
    again.manager.set_policy(Idle())
    with caplog.at_level(logging.INFO, logger="malleable.adapters.slurm.cluster"):
        run_cycles(driver, 2)  # the first poll finishes the hand-over, the next sees it
    assert alice.given == [] and len(alice.nodes) == 3
    assert ["scontrol", "update", f"JobId={alice.job_id}", "NumNodes=ALL"] in fake.calls
    assert _closed(again, "handover") == "finished"
    assert again.manager.records[JOB].sizes[-1][1] == 3  # the size Slurm shows, read back
    assert "handover intent for alice:a1 after the restart: finished" in caplog.text
    again.close()


class Idle:
    """A policy that decides nothing: no grow hides (or races) what the restart does."""

    name = "idle"

    def decide(self, view: View, now: float) -> Decision:
        return []


def test_an_intent_an_oar_site_cannot_finish_is_abandoned_with_a_warning(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """OAR's adapter journals no intents (its extension jobs are journaled as they come and
    taken back by ``adopt``); an open one on an OAR site (a site whose kind changed, a
    journal from another version) is closed ``moot``, and the log says so."""
    fake = FakeOar(["grid-n1", "grid-n2"])
    fake.user = "alice"
    OarCtl(fake).submit(["--hold", "-n", tags.encode_oar(tags.UserTag(1, 2, sub="a1")),
                         "-l", "nodes=1"], "sleep 600")
    fake.user = ACCOUNT
    config = service_config(tmp_path)
    service = open_service(config, lambda site: OarCtl(fake))
    run_cycles(driver_for(service))  # placed: the journal has a job to resume
    token = service.store.intent("cancel", "grid", JOB, 0, None, 1.0)
    service.store.close()
    with caplog.at_level(logging.WARNING, logger="malleable.store"):
        again = open_service(config, lambda site: OarCtl(fake))
    assert again.store.intents("open") == []
    (intent,) = [i for i in again.store.intents(None) if i.token == token]
    assert (intent.state, intent.detail) == ("moot", "its site cannot finish intents")
    assert ("cancel intent of alice:a1 on grid left open before the restart: abandoned "
            "(its site cannot finish intents)") in caplog.text
    again.close()
