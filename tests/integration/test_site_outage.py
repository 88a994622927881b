"""One site's slurmctld stopped in the middle of a ``manager run`` on the real testbed.

The other site keeps placing and its cycles stay short; the run ends ``done`` with
every job completed (jobs on the stopped site keep running under their slurmd and are
taken up again when the controller is back); ``summary.json`` reports the outage.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from malleable.cli import main
from malleable.testbed import Testbed
from tests.fakes.waits import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

OUTAGE = 25.0  # real seconds with uva's controller stopped
JOBS = 12


def _busy(tb: Testbed) -> int:
    argv = ["squeue", "--noheader", "--format=%i", "--states=PENDING,RUNNING,CONFIGURING"]
    return sum(len(tb.exec(site, argv, check=True).stdout.split()) for site in ("vu", "uva"))


@pytest.fixture
def quiet(small_testbed: Testbed) -> Iterator[Testbed]:
    wait_for(lambda: _busy(small_testbed) == 0, 60, "an empty queue before the run")
    yield small_testbed
    _start_controller(small_testbed)  # whatever happened, the controller runs again
    for site in ("vu", "uva"):
        small_testbed.exec(site, ["scancel", "--user=malleable"])
    wait_for(lambda: _busy(small_testbed) == 0, 90, "an empty queue after the run")


def _controller_up(tb: Testbed) -> bool:
    return "UP" in tb.exec("uva", ["scontrol", "ping"], timeout=40).stdout


def _start_controller(tb: Testbed) -> None:
    if tb.exec("uva", ["pgrep", "-x", "slurmctld"]).returncode != 0:
        tb.exec("uva", ["/usr/sbin/slurmctld"], check=True)
    wait_for(lambda: _controller_up(tb), 60, "uva's slurmctld to answer again")


def _outage(tb: Testbed, began: threading.Event, ended: threading.Event) -> None:
    time.sleep(8.0)  # a few jobs placed on both sites first
    tb.exec("uva", ["pkill", "-x", "slurmctld"], check=True)
    began.set()
    time.sleep(OUTAGE)
    _start_controller(tb)
    ended.set()


def test_one_site_down_never_stops_the_other(quiet: Testbed, tmp_path: Path) -> None:
    config = tmp_path / "clusters.toml"
    config.write_text(quiet.config_toml())
    out = tmp_path / "out"
    began, ended = threading.Event(), threading.Event()
    outage = threading.Thread(target=_outage, args=(quiet, began, ended), daemon=True)
    outage.start()
    rc = main(["manager", "run", "--config", str(config), "--approach", "pwa", "--policy",
               "fpsma", "--workload", "wm", "--jobs", str(JOBS), "--time-scale", "0.05",
               "--poll", "0.5", "--out", str(out), "--json"])
    outage.join(timeout=OUTAGE + 90)
    summary = json.loads((out / "summary.json").read_text())
    health = summary["site_health"]
    print(f"\noutage: rc {rc}, stopped {summary['stopped']}, cycles {summary['cycles']}, "
          f"cycle p95 {summary['cycle_p95_s']} s, health {json.dumps(health)}")
    assert began.is_set(), "the run ended before the outage began"
    assert rc == 0 and summary["stopped"] == "done" and summary["completed"] == JOBS
    assert health["vu"]["availability"] == 1.0 and health["vu"]["outages"] == 0
    assert health["uva"]["outages"] >= 1 and health["uva"]["availability"] < 1.0
    assert health["uva"]["online"]  # used again once back
    assert summary["cycle_p95_s"] < 2.0
