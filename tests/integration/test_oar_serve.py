"""``malleable manager serve`` over two OAR testbed sites (grid and lab, 2 nodes each).

Alice submits with ``malleable submit --site grid,lab`` over SSH as herself: one held copy
on each site, the same submission. The service runs here as a process of its own (``python3
-m malleable manager serve``; ``--allow-root`` when the tests run as root) and reaches both
OAR servers over SSH as the service account ``malleable``: every OAR command it runs, runs
there as ``malleable``, whose only privilege is the image's sudo rule (``oarresume`` and
``oardel`` as ``oar``). It resumes alice's copy on grid (worst fit: bob's untagged job
holds a node of lab), her job runs to completion there, and her copy on lab is deleted (it ends
cancelled); bob's untagged job and his forged tag are left alone, the forgery logged once.
Bounded by the test timeout; the module's testbed is taken down after its test.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from malleable.adapters.oar.ctl import _submitted_ids
from malleable.adapters.oar.parse import parse_oarstat
from malleable.cli import main
from malleable.model import JobState
from malleable.testbed import Docker, Site, Testbed, Topology
from tests.fakes.waits import own_testbed, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

SITES = ("grid", "lab")
TOPOLOGY = Topology("oar-serve", tuple(Site(s, 2, containers=1, kind="oar") for s in SITES))
SRC = Path(__file__).resolve().parents[2] / "src"
SERVICE = """[service]
state = "{dir}/state.sqlite"
poll = 2.0
metrics = ""

"""


def _jobs(tb: Testbed, site: str, *ids: int) -> dict[int, dict[str, Any]]:
    argv = ["oarstat", "-fJ", *(a for i in ids for a in ("-j", str(i)))] if ids \
        else ["oarstat", "-J"]
    out = tb.exec(site, argv, check=True).stdout
    return {int(k): v for k, v in json.loads(out or "{}").items()}


def _state(tb: Testbed, site: str, job: int) -> str:
    return str(_jobs(tb, site, job)[job]["state"])


def _oarsub_as(tb: Testbed, site: str, user: str, *options: str) -> int:
    """``oarsub`` in ``user``'s login shell (``docker exec -u`` cannot run it)."""
    script = "cd && oarsub -J " + " ".join(f"'{o}'" for o in options)
    (job_id,) = _submitted_ids(tb.exec(site, ["su", "-", user, "-c", script], check=True,
                                       timeout=60).stdout)
    return job_id


@pytest.fixture(scope="module")
def oar(docker_engine: Docker, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Testbed]:
    yield from own_testbed("oarserve", TOPOLOGY, tmp_path_factory.mktemp("oar-serve"),
                           docker_engine)


@pytest.fixture(scope="module")
def alice_config(oar: Testbed, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A clusters config that reaches both sites over SSH as alice (a key made here)."""
    where = tmp_path_factory.mktemp("alice")
    key = where / "id_ed25519"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "alice-test", "-f",
                    str(key)], check=True, timeout=30)
    for site in SITES:  # each site has its own /home
        oar.exec(site, ["sh", "-c", "install -d -o alice -g alice -m 0700 /home/alice/.ssh && "
                        "cat > /home/alice/.ssh/authorized_keys && "
                        "chown alice:alice /home/alice/.ssh/authorized_keys && "
                        "chmod 0600 /home/alice/.ssh/authorized_keys"],
                 input_text=key.with_suffix(".pub").read_text(), check=True)
    text = re.sub(r'(?m)^user = .*$', 'user = "alice"', oar.config_toml())
    text = re.sub(r'(?m)^key = .*$', f'key = "{key}"', text)
    config = where / "clusters.toml"
    config.write_text(text)
    return config


class Serve:
    """``malleable manager serve`` as a process of this machine, its log, its stop."""

    def __init__(self, tb: Testbed, where: Path) -> None:
        self.dir = where
        self.config = where / "manager.toml"
        self.config.write_text(SERVICE.format(dir=where) + tb.config_toml())
        self.log = where / "serve.log"
        env = {**os.environ, "PYTHONPATH": str(SRC)}
        root = ["--allow-root"] if os.geteuid() == 0 else []
        with self.log.open("w") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "malleable", "manager", "serve", "--config",
                 str(self.config), *root], stdout=log, stderr=subprocess.STDOUT, env=env,
                stdin=subprocess.DEVNULL)

    def status(self) -> dict[str, Any]:
        path = self.dir / "state.sqlite.status.json"
        return json.loads(path.read_text()) if path.exists() else {}

    def job(self, job_id: str) -> dict[str, Any]:
        return next((j for j in self.status().get("jobs", ()) if j["id"] == job_id), {})

    def text(self) -> str:
        return self.log.read_text()

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(60)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait(30)


@pytest.fixture
def serve(oar: Testbed, tmp_path: Path) -> Iterator[Serve]:
    service = Serve(oar, tmp_path)
    try:
        yield service
    finally:
        service.stop()
        print(service.text()[-8000:])  # shown by pytest when the test failed
        for site in SITES:
            live = list(_jobs(oar, site))
            if live:
                oar.exec(site, ["su", "oar", "-s", "/bin/sh", "-c",
                                "oardel " + " ".join(map(str, live))])


def test_the_service_runs_alice_s_job_on_one_site_and_deletes_her_other_copy(
        oar: Testbed, alice_config: Path, serve: Serve,
        capsys: pytest.CaptureFixture[str]) -> None:
    bob = _oarsub_as(oar, "lab", "bob", "-l", "nodes=1", "sleep 600")
    forged = _oarsub_as(oar, "grid", "bob", "--hold", "-n", "m1;min=1;max=2;user=alice",
                        "-l", "nodes=1", "sleep 600")
    wait_for(lambda: _state(oar, "lab", bob) == "Running", 120, "bob's job running on lab")
    code = main(["submit", "--config", str(alice_config), "--site", "grid,lab", "--min", "1",
                 "--max", "2", "--time", "10", "--", "sh", "-c",
                 'sleep 5; echo "done on $(hostname)"'])
    job_id = capsys.readouterr().out.strip()
    assert code == 0 and job_id.startswith("alice:")
    copies = {s: [i for i, j in _jobs(oar, s).items() if j["owner"] == "alice"]
              for s in SITES}
    (on_grid,), (on_lab,) = copies["grid"], copies["lab"]
    wait_for(lambda: serve.job(job_id).get("state") == "completed", 240,
             f"alice's job {job_id} completed by the service",
             explain=lambda: serve.text()[-3000:])
    assert serve.job(job_id)["site"] == "grid"
    assert serve.job(job_id)["slurm_id"] == on_grid
    (ran,) = parse_oarstat(oar.exec("grid", ["oarstat", "-fJ", "-j", str(on_grid)],
                                    check=True).stdout)
    assert (ran.owner, ran.state_raw, ran.exit_code) == ("alice", "Terminated", 0)
    assert ran.events[:1] == ("RESUME_JOB",)
    said = oar.exec("grid", ["cat", f"OAR.{on_grid}.stdout"], user="alice", check=True).stdout
    assert said.strip() == "done on grid-c0"
    wait_for(lambda: _state(oar, "lab", on_lab) == "Error", 120, "alice's lab copy deleted")
    (deleted,) = parse_oarstat(oar.exec("lab", ["oarstat", "-fJ", "-j", str(on_lab)],
                                        check=True).stdout)
    assert deleted.state is JobState.CANCELLED and deleted.events[0] == "FRAG_JOB_REQUEST"
    # bob's untagged job and his forged tag: left alone, the forgery logged once
    assert _state(oar, "lab", bob) == "Running" and not _jobs(oar, "lab", bob)[bob]["events"]
    assert _state(oar, "grid", forged) == "Hold"
    log = serve.text()
    assert log.count("event=tag_ignored") == 1 and f"oar_id={forged}" in log
    assert f"event=placed site=grid job={job_id} oar_id={on_grid} nodes=1" in log
    assert f"event=copy_cancelled site=lab oar_id={on_lab}" in log
    assert serve.stop() == 0
