"""One site's slurmctld stopped in the middle of a ``manager run`` on the real testbed.

The other site keeps placing and its cycles stay short; the run ends ``done`` with
every job completed (jobs on the stopped site keep running under their slurmd and are
taken up again when the controller is back); ``summary.json`` reports the outage.
An outage longer than ``--site-timeout``: the site is given up (its jobs recorded
failed), probed, cancels those jobs when it answers again, and is used again (once its
third job runs there, vu's job has done its part and is ended by vu's ``finish_file``).
"""

from __future__ import annotations

import contextlib
import csv
import json
import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from malleable.adapters.slurm import meta
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


def _runs_on(tb: Testbed, site: str) -> bool:
    argv = ["squeue", "--noheader", "--format=%i", "--states=RUNNING", "--user=malleable"]
    return bool(tb.exec(site, argv, check=True).stdout.split())


def _outage(tb: Testbed, began: threading.Event, ended: threading.Event,
            noted: dict[str, float]) -> None:
    """uva's controller stopped for OUTAGE s once a job of the run runs on each site (it was
    a bare 8-s sleep, which on a loaded machine could come before any job ran on uva)."""
    start = time.monotonic()
    wait_for(lambda: _runs_on(tb, "vu") and _runs_on(tb, "uva"), 90,
             "a job of the run running on each site")
    tb.exec("uva", ["pkill", "-x", "slurmctld"], check=True)
    noted["outage_began_s"] = round(time.monotonic() - start, 1)
    began.set()
    time.sleep(OUTAGE)
    _start_controller(tb)
    noted["outage_ended_s"] = round(time.monotonic() - start, 1)
    ended.set()


def test_one_site_down_never_stops_the_other(quiet: Testbed, tmp_path: Path) -> None:
    config = tmp_path / "clusters.toml"
    config.write_text(quiet.config_toml())
    out = tmp_path / "out"
    began, ended = threading.Event(), threading.Event()
    times = dict[str, float]()  # when the outage began and ended, from the thread's start
    outage = threading.Thread(target=_outage, args=(quiet, began, ended, times), daemon=True)
    outage.start()
    rc = main(["manager", "run", "--config", str(config), "--approach", "pwa", "--policy",
               "fpsma", "--workload", "wm", "--jobs", str(JOBS), "--time-scale", "0.05",
               "--poll", "0.5", "--out", str(out), "--json"])
    outage.join(timeout=OUTAGE + 90)
    summary = json.loads((out / "summary.json").read_text())
    health = summary["site_health"]
    print(f"\noutage {times}: rc {rc}, stopped {summary['stopped']}, "
          f"cycles {summary['cycles']}, "
          f"cycle p95 {summary['cycle_p95_s']} s, health {json.dumps(health)}")
    assert began.is_set(), "the run ended before the outage began"
    assert rc == 0 and summary["stopped"] == "done" and summary["completed"] == JOBS
    assert health["vu"]["availability"] == 1.0 and health["vu"]["outages"] == 0
    assert health["uva"]["outages"] >= 1 and health["uva"]["availability"] < 1.0
    assert health["uva"]["online"]  # used again once back
    assert summary["cycle_p95_s"] < 2.0


GIVE_UP = 6.0  # --site-timeout of the second run: the 25-s outage outlasts it
#: vu's ``finish_file`` in the second run (docs/slurm.md): created once the third job runs on
#: uva, it ends vu's job, whose only part was to keep vu full until then.
FINISH_FILE = "/home/malleable/site-outage.finish"
# Rigid jobs of the `fixed` application (run time from field 4), at time scale 0.05: two
# 4-node jobs fill both sites (80 and 60 real s: longer than the outage and the probe after
# it, so the one on uva is still running when uva answers again), and a third one arrives
# at 50 s, when only uva can have 4 idle nodes again.
SWF = """; Version: 2.2
1 0 -1 1600 4 -1 -1 4 -1 -1 -1 -1 -1 -1 -1 -1 -1 -1
2 20 -1 1200 4 -1 -1 4 -1 -1 -1 -1 -1 -1 -1 -1 -1 -1
3 1000 -1 200 4 -1 -1 4 -1 -1 -1 -1 -1 -1 -1 -1 -1 -1
"""


def _finish_vu_once_the_third_runs_on_uva(tb: Testbed, stop: threading.Event,
                                          noted: dict[str, float]) -> None:
    """Create vu's finish file once job 3 of the run runs on uva (a failed squeue ends the
    watch, never the test: vu's job then runs to its end)."""
    argv = ["squeue", "--noheader", "--format=%j", "--states=RUNNING", "--user=malleable"]
    began = time.monotonic()
    with contextlib.suppress(Exception):
        while not stop.wait(1.0):
            if any(name.endswith(".3") for name in tb.exec("uva", argv, check=True).stdout.split()):
                tb.exec("vu", ["touch", FINISH_FILE], user="malleable", timeout=40, check=True)
                noted["finish_at_s"] = time.monotonic() - began
                return


def test_a_site_given_up_is_probed_cancels_its_failed_jobs_and_is_used_again(
        quiet: Testbed, tmp_path: Path) -> None:
    for site in ("vu", "uva"):
        quiet.exec(site, ["rm", "-f", FINISH_FILE], user="malleable", timeout=40, check=True)
    config = tmp_path / "clusters.toml"
    config.write_text(re.sub(r"^(\[clusters\.vu\])$", rf'\1\nfinish_file = "{FINISH_FILE}"',
                             quiet.config_toml(), flags=re.MULTILINE))
    assert config.read_text().count("finish_file") == 1
    workload = tmp_path / "three.swf"
    workload.write_text(SWF)
    out = tmp_path / "out"
    began, ended = threading.Event(), threading.Event()
    times = dict[str, float]()
    outage = threading.Thread(target=_outage, args=(quiet, began, ended, times), daemon=True)
    outage.start()
    stop, noted = threading.Event(), dict[str, float]()
    finisher = threading.Thread(target=_finish_vu_once_the_third_runs_on_uva,
                                args=(quiet, stop, noted), daemon=True)
    finisher.start()
    try:
        rc = main(["manager", "run", "--config", str(config), "--approach", "pwa", "--policy",
                   "fpsma", "--workload", str(workload), "--time-scale", "0.05",
                   "--poll", "0.5", "--site-timeout", str(GIVE_UP), "--out", str(out),
                   "--json"])
    finally:
        stop.set()
        finisher.join(timeout=60)
        quiet.exec("vu", ["rm", "-f", FINISH_FILE], user="malleable", timeout=40)
    outage.join(timeout=OUTAGE + 90)
    summary = json.loads((out / "summary.json").read_text())
    health = summary["site_health"]["uva"]
    with (out / "jobs.csv").open() as f:
        rows = {r["job"]: r for r in csv.DictReader(f)}
    failed = summary["failed_jobs"]
    names = {meta.job_name(job, summary["run_id"]): job for job in failed}
    acct = quiet.exec("uva", ["sacct", "-X", "-n", "-P", "--format=JobName,State",
                              f"--name={','.join(names)}"], check=True).stdout.splitlines()
    states = dict(line.split("|", 1) for line in acct if line.strip())
    print(f"\ngiven up (outage {times}): rc {rc}, stopped {summary['stopped']}, "
          f"uva {json.dumps(health)}, "
          f"failed {failed}, their Slurm jobs {states}, vu's finish file {noted}, jobs "
          f"{[(j, r['cluster'], r['state'], r['start'], r['end']) for j, r in rows.items()]}")
    assert began.is_set() and ended.is_set()
    assert rc == 5 and summary["stopped"] == "done"  # ended by its jobs, failures listed
    assert len(failed) == 1 and all("site uva was unavailable" in why and "given up" in why
                                    for why in failed.values())
    assert all(rows[job]["cluster"] == "uva" for job in failed)
    # the copy the run recorded failed was cancelled there when uva answered again
    assert set(states) == set(names), states
    assert all(s.split()[0] == "CANCELLED" for s in states.values()), states
    # probed and used again: back in the view, and the third job ran there after it
    assert health["returns"] >= 1 and not health["given_up"] and health["online"]
    given_up_at = min(float(rows[job]["end"]) for job in failed)
    third = [r for j, r in rows.items() if j not in failed and r["cluster"] == "uva"]
    assert len(third) == 1 and third[0]["state"] == "completed"
    assert float(third[0]["start"]) > given_up_at
    assert summary["site_health"]["vu"]["availability"] == 1.0
    assert summary["cycle_p95_s"] < 2.0
