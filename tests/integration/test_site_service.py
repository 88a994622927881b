"""The site service on the testbed: users' malleable jobs grown as the Slurm
operator `malleable`, a rigid job untouched, a forged tag ignored, SIGKILL and restart,
SIGHUP, SIGTERM, status --json and /metrics (issue 13).

The users submit with plain ``sbatch --hold --comment=TAG`` (the documented equivalent of
``malleable submit``: the testbed image carries the package of its build, not this
checkout). The service runs on this machine and reaches both sites over SSH as
``malleable`` (its Slurm identity); locally it runs as whoever runs the tests, hence the
hidden ``--allow-root``.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from malleable.testbed import Testbed
from tests.fakes.waits import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

SRC = Path(__file__).resolve().parents[2] / "src"
SERVICE = """[service]
state = "{dir}/state.sqlite"
poll = {poll}
metrics = "127.0.0.1:0"

[policy]
name = "fpsma"
[policy.options]
approach = "pwa"
"""


def _tag(low: int, high: int, user: str | None = None) -> str:
    body = {"malleable_job": 1, "min": low, "max": high}
    if user:
        body["user"] = user
    return json.dumps(body, separators=(",", ":"))


def _sbatch(tb: Testbed, site: str, user: str, nodes: int, comment: str = "",
            hold: bool = True) -> str:
    argv = ["sbatch", "--parsable", f"-N{nodes}", "--exclusive", "--wrap", "sleep 600"]
    if hold:
        argv.insert(2, "--hold")
    if comment:
        argv.insert(2, f"--comment={comment}")
    return tb.exec(site, argv, user=user, timeout=30, check=True).stdout.strip().split(";")[0]


def _job(tb: Testbed, site: str, job: str) -> dict[str, str]:
    out = tb.exec(site, ["scontrol", "-o", "show", "job", job], timeout=30).stdout
    return dict(f.split("=", 1) for f in out.split() if "=" in f)


class Serve:
    """The service as a process; its log; stopped (killed if need be) at the end."""

    def __init__(self, config: Path) -> None:
        self.config = config
        self.log = config.with_name(f"serve-{os.getpid()}.log")
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        env = {**os.environ, "PYTHONPATH": str(SRC)}
        with self.log.open("ab") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "malleable", "manager", "serve", "--config",
                 str(self.config), "--allow-root"], stdout=subprocess.DEVNULL, stderr=log,
                env=env)

    def text(self) -> str:
        return self.log.read_text()

    def stop(self, sig: int = signal.SIGKILL) -> int:
        assert self.proc is not None
        self.proc.send_signal(sig)
        return self.proc.wait(timeout=120)


@pytest.fixture
def serve(small_testbed: Testbed, tmp_path: Path) -> Iterator[Serve]:
    config = tmp_path / "manager.toml"
    config.write_text(SERVICE.format(dir=tmp_path, poll=3.0) + small_testbed.config_toml())
    service = Serve(config)
    yield service
    if service.log.exists():  # shown by pytest when the test failed
        print("".join(line for line in service.text().splitlines(keepends=True)
                      if "paramiko" not in line)[-6000:])
    if service.proc is not None and service.proc.poll() is None:
        service.proc.kill()
        service.proc.wait()
    for site in ("vu", "uva"):
        for user in ("alice", "bob", "carol"):
            small_testbed.exec(site, ["scancel", "-u", user], timeout=30)


def test_the_service_grows_users_jobs_and_survives_restarts(
        small_testbed: Testbed, serve: Serve, tmp_path: Path) -> None:
    tb = small_testbed
    carol = _sbatch(tb, "vu", "carol", 1, hold=False)
    alice = _sbatch(tb, "vu", "alice", 1, _tag(1, 3))
    bob = _sbatch(tb, "uva", "bob", 1, _tag(1, 2))
    forged = _sbatch(tb, "uva", "bob", 1, _tag(1, 4, user="alice"))
    serve.start()

    # alice's and bob's jobs are released and grown to their maximum, as Slurm shows
    wait_for(lambda: _job(tb, "vu", alice).get("NumNodes") == "3", 120, "alice's job at 3")
    wait_for(lambda: _job(tb, "uva", bob).get("NumNodes") == "2", 120, "bob's job at 2")
    assert _job(tb, "vu", alice)["UserId"].startswith("alice(")
    rigid = _job(tb, "vu", carol)
    assert (rigid["JobState"], rigid["NumNodes"]) == ("RUNNING", "1")
    # the forged tag (bob's job claiming to be alice's) is logged and the job left held
    assert re.search(rf"event=tag_ignored site=uva slurm_id={forged} user=bob", serve.text())
    assert _job(tb, "uva", forged)["JobState"] == "PENDING"

    # status --json and /metrics
    status = json.loads(subprocess.run(
        [sys.executable, "-m", "malleable", "manager", "status", "--config", str(serve.config),
         "--json"], capture_output=True, check=True, env={**os.environ, "PYTHONPATH": str(SRC)}
    ).stdout)
    assert status["running"] is True
    sizes = {j["id"]: j["size"] for j in status["jobs"]}
    assert sizes == {f"alice:vu.{alice}": 3, f"bob:uva.{bob}": 2}
    port = int(re.findall(r"event=metrics address=127.0.0.1:(\d+)", serve.text())[-1])
    metrics = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10).read()
    assert b'malleable_resizes_total{kind="grow",outcome="done"} 2.0' in metrics
    assert b'malleable_managed_jobs{state="running"} 2.0' in metrics

    # SIGKILL; meanwhile bob submits on vu (full): after the restart the service takes
    # everything up again from its journal, once, and adopts bob's new job
    serve.stop(signal.SIGKILL)
    bob2 = _sbatch(tb, "vu", "bob", 1, _tag(1, 1))
    serve.start()
    wait_for(lambda: "event=resumed" in serve.text(), 60, "the resume")
    assert re.search(r"event=resumed run=\w+ jobs=2 followed=2 waiting=0", serve.text())
    wait_for(lambda: f"event=adopted job=bob:vu.{bob2}" in serve.text(), 60, "bob's 2nd job")
    assert serve.text().count(f"event=adopted job=alice:vu.{alice}") == 1  # not twice
    assert _job(tb, "vu", alice)["JobState"] == "RUNNING"
    assert _job(tb, "vu", carol)["NumNodes"] == "1"

    # SIGHUP reloads (a new poll period); SIGTERM ends with 0
    serve.config.write_text(serve.config.read_text().replace("poll = 3.0", "poll = 2.0"))
    assert serve.proc is not None
    serve.proc.send_signal(signal.SIGHUP)
    wait_for(lambda: "event=reloaded policy=fpsma poll=2.0" in serve.text(), 60, "the reload")
    assert serve.stop(signal.SIGTERM) == 0
    assert "event=stopped reason=signal" in serve.text()
    assert _job(tb, "vu", alice)["JobState"] == "RUNNING"  # jobs keep running
