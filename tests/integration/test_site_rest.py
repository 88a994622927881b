"""The site service over slurmrestd (issue 38), once per Slurm version of the matrix.

``manager serve`` runs in the uva controller as ``restsvc``, a user with no SSH key, with a
config whose vu site is ``transport = "rest"``: vu's slurmrestd URL and a token file of
the service account ``malleable``, no SSH key at all.
Users submit held, tagged jobs with ``malleable submit`` on the login node as themselves;
the service places them (``NumNodes`` + release), grows alice's job when nodes free up
(helper allocation over REST: 24.11 and 26.05) and shrinks it to place bob's, each
confirmed by reading Slurm (``scontrol``). On 22.05 (API v0.0.38, no ``job/allocate``) the
grow is declared absent: the status says why, and the job keeps its size.

Then the helper of a grow (24.11, 26.05), read back from accounting (``sacct``), carries
alice's account, partition and QoS and a time limit no longer than her job has left.
"""

from __future__ import annotations

import datetime
import json
import math
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest

from malleable.testbed import Testbed
from tests.fakes.waits import clear_selection, site_quiet, site_state, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

SITE = "vu"
#: alice's non-default account and QoS (helpers must be charged to them).
ACCOUNT = "proj2"
QOS = "gold"
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


def test_manager_serve_over_rest(quiet: Testbed) -> None:
    tb = quiet
    version = tb.record().slurm
    service = Service(tb)
    _project(tb)
    began = tb.exec(SITE, ["date", "+%Y-%m-%dT%H:%M:%S"], timeout=30, check=True).stdout.strip()
    carol = tb.exec(SITE, ["sbatch", "--parsable", "-N2", "--exclusive", "--wrap", "sleep 600"],
                    user="carol", timeout=30, check=True).stdout.strip()
    alice = tb.exec(SITE, ["env", f"SBATCH_ACCOUNT={ACCOUNT}", f"SBATCH_QOS={QOS}", "malleable",
                           "submit", "--min", "1", "--max", "4", "--initial", "2", "--time",
                           "30", "--", "sleep", "600"], user="alice", timeout=60,
                    check=True).stdout.strip()
    service.start()
    try:
        _serve(tb, version, service, carol, alice)
        if version != "22.05":  # the grow's helper, read back from accounting
            _check_helpers(tb, began, alice, expected=1)
    finally:
        service.stop()
        print(service.log()[-6000:])


class Service:
    """``manager serve`` on the uva controller as ``restsvc``, a user made here with no SSH
    key and no login: it reaches vu only through vu's slurmrestd (``http://vu-ctl:6820``)
    with a token of the service account ``malleable`` (operator). Its home is on the
    container's own disk, not the shared ``/home``."""

    HOST = "uva"
    USER = "restsvc"
    HOME = "/var/lib/restsvc"

    def __init__(self, tb: Testbed) -> None:
        self.tb = tb
        tb.exec(self.HOST, ["sh", "-c", f"id {self.USER} >/dev/null 2>&1 || useradd --system "
                            f"--create-home --home-dir {self.HOME} --shell /usr/sbin/nologin "
                            f"{self.USER}"], timeout=30, check=True)
        self.sh(f"rm -rf {self.HOME}/serve && mkdir -m 0700 {self.HOME}/serve")
        token = tb.rest_token(SITE, lifespan=3600).read_text()
        self.sh(f"umask 077 && cat > {self.HOME}/serve/vu.token", input_text=token)
        table = _rest_table(tb)
        table = re.sub(r'url = "[^"]*"', 'url = "http://vu-ctl:6820"', table)
        table = re.sub(r'token_file = "[^"]*"', f'token_file = "{self.HOME}/serve/vu.token"',
                       table)
        self.config = f"{self.HOME}/serve/manager.toml"
        self.sh(f"cat > {self.config}",
                input_text=SERVICE.format(dir=f"{self.HOME}/serve") + table)
        assert ".ssh" not in self.sh(f"ls -A {self.HOME}").split()  # no SSH key here

    def sh(self, script: str, input_text: str | None = None, check: bool = True) -> str:
        return self.tb.exec(self.HOST, ["sh", "-c", script], user=self.USER, workdir=self.HOME,
                            timeout=60, check=check, input_text=input_text).stdout

    def start(self) -> None:
        self.sh(f"cd {self.HOME}/serve; nohup malleable manager serve --config {self.config} "
                "> serve.log 2>&1 < /dev/null & echo $! > serve.pid")

    def stop(self) -> None:
        pid = self.sh(f"cat {self.HOME}/serve/serve.pid 2>/dev/null || true").strip()
        if pid.isdigit():
            self.sh(f"kill -TERM {pid} 2>/dev/null; for i in $(seq 50); do kill -0 {pid} "
                    f"2>/dev/null || exit 0; sleep 0.2; done; kill -KILL {pid}", check=False)

    def running(self) -> bool:
        pid = self.sh(f"cat {self.HOME}/serve/serve.pid").strip()
        return bool(self.sh(f"kill -0 {pid} 2>/dev/null && echo yes || true").strip())

    def log(self) -> str:
        return self.sh(f"cat {self.HOME}/serve/serve.log 2>/dev/null || true")

    def status(self) -> dict[str, Any]:
        out = self.tb.exec(self.HOST, ["malleable", "manager", "status", "--config",
                                       self.config, "--json"], user=self.USER,
                           workdir=self.HOME, timeout=60)
        return cast(dict[str, Any], json.loads(out.stdout)) if out.ok else {}


def _serve(tb: Testbed, version: str, service: Service, carol: str, alice: str) -> None:
    # placed on the two idle nodes (carol holds the other two), through REST
    wait_for(lambda: _job(tb, alice).get("JobState") == "RUNNING", 90, "alice's job placed",
             explain=service.log)
    assert _job(tb, alice)["NumNodes"] == "2"
    wait_for(lambda: bool(service.status().get("sites")), 30, "the status file")
    (site,) = service.status()["sites"]
    grows = version != "22.05"
    if grows:
        assert site["missing"] == {}
    else:
        assert "no job/allocate" in site["missing"]["EXPAND"]
    tb.exec(SITE, ["scancel", carol], timeout=30, check=True)
    if grows:  # carol's two nodes free: alice's job grown to 4 over REST
        wait_for(lambda: _job(tb, alice).get("NumNodes") == "4", 90, "alice's job grown",
                 explain=service.log)
    else:  # declared absent: never tried, the job keeps its size
        wait_for(lambda: _idle(tb) == 2, 60, "carol's nodes idle")
        time.sleep(3)
        assert _job(tb, alice)["NumNodes"] == "2"
    # bob needs 3 nodes: alice's job is shrunk to 1 to place it (PWA: the waiting job first)
    bob = _submit(tb, "bob", "--min", "3", "--max", "3", "--", "sleep", "600")
    wait_for(lambda: _job(tb, bob).get("JobState") == "RUNNING", 90, "bob's job placed",
             explain=service.log)
    assert (_job(tb, alice)["NumNodes"], _job(tb, alice)["JobState"]) == ("1", "RUNNING")
    assert _job(tb, bob)["NumNodes"] == "3" and _job(tb, bob)["UserId"].startswith("bob(")
    assert service.running()  # still serving
    assert "ssh" not in service.log().lower()


def _project(tb: Testbed) -> None:
    """alice's non-default account and QoS (Slurm's accounting; idempotent)."""
    for argv in (["sacctmgr", "-i", "add", "qos", QOS],
                 ["sacctmgr", "-i", "add", "account", ACCOUNT, f"cluster={SITE}"],
                 ["sacctmgr", "-i", "add", "user", "alice", f"account={ACCOUNT}",
                  f"cluster={SITE}"],
                 ["sacctmgr", "-i", "modify", "user", "alice", "set", f"qos+={QOS}"],
                 # the service account grows jobs of that account: it needs an association
                 # there, or Slurm charges its helpers to its default account (docs/site.md)
                 ["sacctmgr", "-i", "add", "user", "malleable", f"account={ACCOUNT}",
                  f"cluster={SITE}"],
                 ["sacctmgr", "-i", "modify", "user", "malleable", "set", f"qos+={QOS}"]):
        tb.exec(SITE, argv, timeout=60)  # "nothing new added" on a second run is fine


def _check_helpers(tb: Testbed, began: str, job: str, expected: int) -> None:
    """The helper allocations made since ``began`` (sacct) carry the job's account,
    partition and QoS, and a time limit within what the job had left."""
    shown = _job(tb, job)
    limit = _minutes(shown["TimeLimit"])

    def rows() -> list[dict[str, str]]:
        out = tb.exec(SITE, ["sacct", "-X", "-n", "-P", "--allusers", "--name=m.helper",
                             f"--starttime={began}",
                             "--format=JobID,Account,Partition,QOS,Timelimit,User,Submit"],
                      timeout=30, check=True).stdout
        keys = ("id", "account", "partition", "qos", "limit", "user", "submit")
        found = [dict(zip(keys, line.split("|"), strict=True))
                 for line in out.splitlines() if line.strip()]
        # sacct's window also holds an earlier test's helper that ended after `began`
        return [row for row in found if row["submit"] >= began]

    wait_for(lambda: len(rows()) >= expected, 60, "the helper in accounting")
    for row in rows():
        assert (row["account"], row["partition"], row["qos"]) == (
            shown["Account"], shown["Partition"], shown["QOS"]), row
        assert shown["Account"] == ACCOUNT and shown["QOS"] == QOS
        # no longer than the job had left when the helper was submitted, in Slurm's whole
        # minutes: slurmctld gives an expand: helper the minutes left to its job's end,
        # rounded up (a grow in the job's first minute shows the job's own 20, whatever
        # --time the service asked; later, 19 and below)
        left = _seconds(shown["StartTime"]) + limit * 60 - _seconds(row["submit"])
        assert 0 < _minutes(row["limit"]) <= math.ceil(left / 60), (row, limit, left)


def _seconds(stamp: str) -> float:
    """An ISO time of Slurm's (``2026-11-28T02:10:11``, the testbed's local time) in seconds."""
    return datetime.datetime.fromisoformat(stamp).timestamp()


def _minutes(text: str) -> int:
    from malleable.adapters.slurm.parse import duration_seconds

    seconds = duration_seconds(text)
    assert seconds is not None, text
    return seconds // 60


def _idle(tb: Testbed) -> int:
    out = tb.exec(SITE, ["sinfo", "-h", "-N", "-t", "idle", "-o", "%N"], timeout=30).stdout
    return len(out.split())


def test_a_helper_over_ssh_is_charged_like_its_job(quiet: Testbed, tmp_path: Path) -> None:
    """The same good-citizen check on the SSH transport: a grow of alice's job (non-default
    account and QoS, 20 minutes) by the service account, through :class:`Resizer`."""
    from malleable.adapters.slurm.resize import Outcome, Resizer
    from malleable.config import load_config
    from malleable.kinds import commands

    tb = quiet
    _project(tb)
    began = tb.exec(SITE, ["date", "+%Y-%m-%dT%H:%M:%S"], timeout=30, check=True).stdout.strip()
    job = tb.exec(SITE, ["sbatch", "--parsable", "-N1", "--exclusive", f"--account={ACCOUNT}",
                         f"--qos={QOS}", "--time=20", "--wrap", "sleep 600"],
                  user="alice", timeout=30, check=True).stdout.strip()
    wait_for(lambda: _job(tb, job).get("JobState") == "RUNNING", 60, "alice's job running")
    path = tmp_path / "clusters.toml"
    path.write_text(tb.config_toml())
    ctl = commands(load_config(path).site(SITE))
    try:
        result = Resizer(ctl).resize(int(job), 2)
    finally:
        ctl.runner.close()
    assert result.outcome is Outcome.DONE, result.describe()
    _check_helpers(tb, began, job, expected=1)
