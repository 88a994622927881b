"""Whole-site faults during a ``manager run`` on the real testbed (issue 12, item 8).

* one site whose SSH host key is not the one its config pins (a reinstalled controller,
  or a man in the middle): every connection to it is refused, the site stays offline,
  and the other site places and runs the whole workload;
* one site's controller *container* stopped and started again in the middle of a run
  (``docker stop`` / ``docker start``: slurmctld and sshd go down together, with a job of
  the run on the site's nodes): the site is offline meanwhile, then used again by the same
  run, on the same published port (chosen at bring-up, so a restart keeps it).

After each: every workload job ran exactly once, to completion (``sacct`` by job name on
every site), no helper of the run is left in any queue, and the healthy site's cycles
stayed short.
"""

from __future__ import annotations

import csv
import json
import subprocess
import threading
import time
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest
from benchmarks.bench_killpoints import check_slurm, judge

from malleable.cli import main
from malleable.testbed import Testbed
from tests.fakes.waits import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

JOBS = 6
SITES = ["vu", "uva"]


def _busy(tb: Testbed) -> int:
    argv = ["squeue", "--noheader", "--format=%i", "--states=PENDING,RUNNING,CONFIGURING"]
    return sum(len(tb.exec(site, argv, check=True).stdout.split()) for site in SITES)


@pytest.fixture
def quiet(small_testbed: Testbed) -> Iterator[Testbed]:
    wait_for(lambda: _busy(small_testbed) == 0, 60, "an empty queue before the run")
    yield small_testbed
    for site in SITES:
        small_testbed.exec(site, ["scancel", "--user=malleable"])
        for node in _unwell(small_testbed, site):  # the session's later tests need them
            small_testbed.exec(site, ["scontrol", "update", f"NodeName={node}",
                                      "State=RESUME"])
    wait_for(lambda: _busy(small_testbed) == 0, 90, "an empty queue after the run")


def _unwell(tb: Testbed, site: str) -> list[str]:
    """The site's nodes that Slurm has drained or marked down (with why)."""
    rows = tb.exec(site, ["sinfo", "--noheader", "--Node", "--format=%N|%t|%E"],
                   check=True).stdout.splitlines()
    return [row.split("|")[0] for row in rows
            if row.split("|")[1].rstrip("*~#!%$@^-") in ("drain", "drng", "down", "fail")]


def _wrong_known_hosts(tmp_path: Path, alias: str) -> Path:
    """A known_hosts that pins ``alias`` to a freshly made key of the server's type."""
    key = tmp_path / "impostor"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)],
                   check=True, capture_output=True, timeout=30)
    kind, blob = key.with_suffix(".pub").read_text().split()[:2]
    path = tmp_path / "known_hosts.wrong"
    path.write_text(f"{alias} {kind} {blob}\n")
    return path


def _with_known_hosts(config: str, site: str, known_hosts: Path) -> str:
    """The clusters config with ``site``'s known_hosts replaced."""
    head, _, tail = config.partition(f"[clusters.{site}]\n")
    table, sep, rest = tail.partition("\n[")
    lines = [f"known_hosts = {json.dumps(str(known_hosts))}"
             if line.startswith("known_hosts =") else line for line in table.splitlines()]
    return f"{head}[clusters.{site}]\n" + "\n".join(lines) + sep + rest


def _run(config: Path, out: Path) -> int:
    return main(["manager", "run", "--config", str(config), "--approach", "pwa", "--policy",
                 "fpsma", "--workload", "wm", "--jobs", str(JOBS), "--time-scale", "0.05",
                 "--poll", "0.5", "--out", str(out), "--json"])


def _exactly_once(tb: Testbed, summary: dict[str, object], out: Path) -> dict[str, str]:
    """Each workload job's site; fails unless each ran once, completed, nothing orphaned."""
    with (out / "jobs.csv").open() as f:
        rows = {r["job"]: r for r in csv.DictReader(f)}
    deadline = time.monotonic() + 90
    while True:  # accounting lags: a restarted slurmctld sends its records to slurmdbd later
        copies, final, orphans = check_slurm(tb, SITES, str(summary["run_id"]), list(rows))
        lost, duplicated = judge({j: r["state"] for j, r in rows.items()}, copies, final, ())
        if not (lost or duplicated or orphans) or time.monotonic() > deadline:
            break
        time.sleep(2)
    assert len(rows) == JOBS and not lost and not duplicated and not orphans, (
        f"lost {lost}, duplicated {duplicated}, orphans {orphans}")
    return {job: row["cluster"] for job, row in rows.items()}


def test_a_site_with_a_wrong_host_key_never_stops_the_other(quiet: Testbed,
                                                            tmp_path: Path) -> None:
    config = tmp_path / "clusters.toml"
    wrong = _wrong_known_hosts(tmp_path, "uva-ctl")
    config.write_text(_with_known_hosts(quiet.config_toml(), "uva", wrong))
    assert tomllib.loads(config.read_text())["clusters"]["uva"]["known_hosts"] == str(wrong)
    out = tmp_path / "out"
    rc = _run(config, out)
    summary = json.loads((out / "summary.json").read_text())
    health = summary["site_health"]
    print(f"\nwrong host key: rc {rc}, stopped {summary['stopped']}, cycles "
          f"{summary['cycles']}, cycle p95 {summary['cycle_p95_s']} s, uva "
          f"{json.dumps(health['uva'])}")
    assert rc == 0 and summary["stopped"] == "done" and summary["completed"] == JOBS
    assert health["uva"]["availability"] == 0.0 and not health["uva"]["online"]
    assert "host key does not match" in health["uva"]["last_error"]
    assert health["vu"]["availability"] == 1.0
    assert summary["cycle_p95_s"] < 2.0
    assert set(_exactly_once(quiet, summary, out).values()) == {"vu"}


OUTAGE = 25.0  # real seconds with uva's controller container stopped


def _runs_on_uva(tb: Testbed) -> bool:
    argv = ["squeue", "--noheader", "--format=%i", "--states=RUNNING", "--user=malleable"]
    return bool(tb.exec("uva", argv, check=True).stdout.split())


def _stop_and_start(tb: Testbed, container: str, stopped: threading.Event,
                    started: threading.Event) -> None:
    wait_for(lambda: _runs_on_uva(tb), 90, "a job of the run running on uva")
    tb.docker.docker_cmd("stop", "--time", "5", container)
    stopped.set()
    time.sleep(OUTAGE)
    tb.docker.docker_cmd("start", container)
    started.set()


def test_a_controller_container_stopped_and_started_mid_run_is_used_again(
        quiet: Testbed, tmp_path: Path) -> None:
    config = tmp_path / "clusters.toml"
    config.write_text(quiet.config_toml())
    before = tomllib.loads(config.read_text())["clusters"]["uva"]["port"]
    container = quiet.container("uva").id
    stopped, started = threading.Event(), threading.Event()
    fault = threading.Thread(target=_stop_and_start, args=(quiet, container, stopped, started),
                             daemon=True)
    fault.start()
    try:
        out = tmp_path / "out"
        rc = _run(config, out)
    finally:
        fault.join(timeout=OUTAGE + 120)
        if not started.is_set():  # whatever happened, the container runs again
            quiet.docker.docker_cmd("start", container)
    wait_for(lambda: "UP" in quiet.exec("uva", ["scontrol", "ping"], timeout=40).stdout,
             120, "uva's slurmctld to answer after the container started")
    summary = json.loads((out / "summary.json").read_text())
    health = summary["site_health"]
    after = tomllib.loads(quiet.config_toml())["clusters"]["uva"]["port"]
    print(f"\ncontainer stopped {OUTAGE} s: rc {rc}, stopped {summary['stopped']}, cycle p95 "
          f"{summary['cycle_p95_s']} s, uva {json.dumps(health['uva'])}; port {before} -> "
          f"{after}")
    assert stopped.is_set() and started.is_set(), "the run ended before the fault"
    assert after == before  # a restarted container keeps its published port
    # slurmctld saved its state when the container stopped: no job lost or duplicated
    assert not _unwell(quiet, "uva"), quiet.exec("uva", ["sinfo", "-N", "-o", "%N %t %E"]).stdout
    assert rc == 0 and summary["stopped"] == "done" and summary["completed"] == JOBS
    assert health["uva"]["outages"] >= 1 and health["uva"]["availability"] < 1.0
    assert health["uva"]["online"] and not health["uva"]["given_up"]  # used again
    assert health["vu"]["availability"] == 1.0
    assert summary["cycle_p95_s"] < 2.0
    assert set(_exactly_once(quiet, summary, out).values()) == {"vu", "uva"}
