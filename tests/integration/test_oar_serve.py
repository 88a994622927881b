"""``malleable manager serve`` over two OAR testbed sites (grid and lab, 2 nodes each).

Alice submits with ``malleable submit --site grid,lab`` over SSH as herself: one held copy
on each site, the same submission. The service runs in grid's OAR server as the service account
``malleable`` (never root), as a site runs it, and reaches both OAR servers over SSH as
``malleable`` with that account's key: its only privilege is the image's sudo rule
(``oarresume`` and ``oardel`` as ``oar``). It resumes alice's copy on grid (worst fit:
bob's untagged job holds a node of lab), her job runs to completion there, and her copy on
lab is deleted (it ends cancelled); bob's untagged job and his forged tag are left alone,
the forgery logged once.
Bounded by the test timeout; the module's testbed is taken down after its test.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from malleable.adapters.oar.parse import parse_oarstat
from malleable.cli import main
from malleable.model import JobState
from malleable.testbed import Docker, Site, Testbed, Topology
from tests.fakes.accounts import user_config
from tests.fakes.serving import Serve, oar_jobs, oar_state, oarsub_as
from tests.fakes.waits import own_testbed, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

SITES = ("grid", "lab")
TOPOLOGY = Topology("oar-serve", tuple(Site(s, 2, containers=1, kind="oar") for s in SITES))
HOME = "/home/malleable/serve"
CONFIG = """[service]
state = "/home/malleable/serve/state.sqlite"
poll = 2.0
metrics = ""

[ssh]
user = "malleable"
key = "/home/malleable/.ssh/id_ed25519"
known_hosts = "/etc/ssh/ssh_known_hosts"

[clusters.grid]
kind = "oar"
host = "grid-ctl"
command_timeout = 120

[clusters.lab]
kind = "oar"
host = "lab-ctl"
command_timeout = 120
"""


@pytest.fixture(scope="module")
def oar(docker_engine: Docker, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Testbed]:
    yield from own_testbed("oarserve", TOPOLOGY, tmp_path_factory.mktemp("oar-serve"),
                           docker_engine)


@pytest.fixture(scope="module")
def alice_config(oar: Testbed, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A clusters config that reaches both sites over SSH as alice (a key made here)."""
    return user_config(oar, SITES, "alice", tmp_path_factory.mktemp("alice"))


@pytest.fixture
def serve(oar: Testbed) -> Iterator[Serve]:
    service = Serve(oar, "grid", HOME, CONFIG)
    try:
        yield service
    finally:
        service.close()
        for site in SITES:
            live = list(oar_jobs(oar, site))
            if live:
                oar.exec(site, ["su", "oar", "-s", "/bin/sh", "-c",
                                "oardel " + " ".join(map(str, live))])


def test_the_service_runs_alice_s_job_on_one_site_and_deletes_her_other_copy(
        oar: Testbed, alice_config: Path, serve: Serve,
        capsys: pytest.CaptureFixture[str]) -> None:
    bob = oarsub_as(oar, "lab", "bob", "-l", "nodes=1", "sleep 600")
    forged = oarsub_as(oar, "grid", "bob", "--hold", "-n", "m1;min=1;max=2;user=alice",
                       "-l", "nodes=1", "sleep 600")
    wait_for(lambda: oar_state(oar, "lab", bob) == "Running", 120, "bob's job running on lab")
    code = main(["submit", "--config", str(alice_config), "--site", "grid,lab", "--min", "1",
                 "--max", "2", "--time", "10", "--", "sh", "-c",
                 'sleep 5; echo "done on $(hostname)"'])
    job_id = capsys.readouterr().out.strip()
    assert code == 0 and job_id.startswith("alice:")
    copies = {s: [i for i, j in oar_jobs(oar, s).items() if j["owner"] == "alice"]
              for s in SITES}
    (on_grid,), (on_lab,) = copies["grid"], copies["lab"]
    wait_for(lambda: serve.job(job_id).get("state") == "completed", 240,
             f"alice's job {job_id} completed by the service",
             explain=lambda: serve.text()[-3000:])
    assert serve.job(job_id)["site"] == "grid"
    assert serve.job(job_id)["native_id"] == on_grid
    (ran,) = parse_oarstat(oar.exec("grid", ["oarstat", "-fJ", "-j", str(on_grid)],
                                    check=True).stdout)
    assert (ran.owner, ran.state_raw, ran.exit_code) == ("alice", "Terminated", 0)
    assert ran.events[:1] == ("RESUME_JOB",)
    said = oar.exec("grid", ["cat", f"OAR.{on_grid}.stdout"], user="alice", check=True).stdout
    assert said.strip() == "done on grid-c0"
    wait_for(lambda: oar_state(oar, "lab", on_lab) == "Error", 120, "alice's lab copy deleted")
    (deleted,) = parse_oarstat(oar.exec("lab", ["oarstat", "-fJ", "-j", str(on_lab)],
                                        check=True).stdout)
    assert deleted.state is JobState.CANCELLED and deleted.events[0] == "FRAG_JOB_REQUEST"
    # bob's untagged job and his forged tag: left alone, the forgery logged once
    assert oar_state(oar, "lab", bob) == "Running"
    assert not oar_jobs(oar, "lab", bob)[bob]["events"]
    assert oar_state(oar, "grid", forged) == "Hold"
    log = serve.text()
    assert log.count("event=tag_ignored") == 1 and f"oar_id={forged}" in log
    assert f"event=placed site=grid job={job_id} oar_id={on_grid} nodes=1" in log
    assert f"event=copy_cancelled site=lab oar_id={on_lab}" in log
    serve.stop()
    assert "event=stopped reason=signal" in serve.text() and "exit=0" in serve.text()
