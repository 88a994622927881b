"""One manager over a Slurm site and an OAR site of one testbed (``manager run``).

A mixed topology (Slurm ``vu`` and OAR ``grid``, 4 nodes each) comes up; its status and
clusters config report each site's kind; a 12-job KOALA workload (time scale 0.05,
EGS under PWA) runs over both sites. Checks: every job completes, jobs ran on both
kinds, the OAR site's jobs grew or shrank through the emulation, and nothing is left in
either queue. Once all 12 jobs have been seen running, both sites' ``finish_file``
(docs/slurm.md, "The payload") ends the work they have left: the tail of the run, with
every job placed, is a wait no check needs. Bounded by the test timeout; the module's
testbed is taken down after it (not at the session's end: one OAR testbed up at a time).
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

from malleable.cli import main
from malleable.testbed import Docker, Site, Testbed, Topology
from tests.fakes.waits import own_testbed, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(1500)]

MIXED = Topology("mixed-small", (Site("vu", 4), Site("grid", 4, kind="oar")))
JOBS = 12
#: both sites' ``finish_file``: created once every job of the run has been seen running
FINISH_FILE = "/home/malleable/oar-mixed.finish"
#: a workload job's name on either site (``m.RUN.JOB``; OAR extensions add ``+``, and
#: Slurm's helper allocations are ``m.helper``)
NAME = re.compile(r"^m\.\w+\.(wm-\d+)$")


def _oar_live(tb: Testbed) -> int:
    out = tb.exec("grid", ["oarstat", "-J"], check=True).stdout
    return len(json.loads(out or "{}"))


def _slurm_live(tb: Testbed) -> dict[int, str]:
    """Every job in vu's queue, with its state (squeue's compact code: ``CG``, ``R`` ...)."""
    out = tb.exec("vu", ["squeue", "--noheader", "--format=%i %t"], check=True).stdout
    return {int(job): state for job, state in (line.split() for line in out.splitlines()
                                               if line.strip())}


def _running(tb: Testbed) -> set[str]:
    """The workload jobs running now on either site (by their base job)."""
    slurm = tb.exec("vu", ["squeue", "--noheader", "--format=%j", "--states=RUNNING",
                           "--user=malleable"], check=True).stdout.split()
    oar = json.loads(tb.exec("grid", ["oarstat", "-J"], check=True).stdout or "{}").values()
    names = slurm + [str(job["name"]) for job in oar if job["state"] == "Running"]
    return {m.group(1) for m in map(NAME.match, names) if m}


def _finish_once_all_ran(tb: Testbed, stop: threading.Event, noted: dict[str, float]) -> None:
    """Create both sites' finish file once each of the run's jobs has been seen running (a
    failed poll ends the watch, never the test: the jobs then run to their end)."""
    seen: set[str] = set()
    began = time.monotonic()
    with contextlib.suppress(Exception):
        while not stop.wait(1.0):
            seen |= _running(tb)
            if len(seen) == JOBS:
                for site in ("vu", "grid"):
                    tb.exec(site, ["touch", FINISH_FILE], user="malleable", timeout=40,
                            check=True)
                noted["finish_at_s"] = time.monotonic() - began
                return


@pytest.fixture(scope="module")
def mixed(docker_engine: Docker, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Testbed]:
    yield from own_testbed("oarwt", MIXED, tmp_path_factory.mktemp("oar-mixed"), docker_engine)


def test_one_manager_over_slurm_and_oar(mixed: Testbed, tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    tb = mixed
    status = tb.status().to_json()
    assert {name: s["kind"] for name, s in status["sites"].items()} == {"vu": "slurm",
                                                                        "grid": "oar"}
    assert status["up"] and status["idle_nodes"] == 8
    for site in ("vu", "grid"):
        tb.exec(site, ["rm", "-f", FINISH_FILE], user="malleable", timeout=40, check=True)
    config = tmp_path / "clusters.toml"
    config.write_text(re.sub(r"^(\[clusters\.(vu|grid)\])$", rf'\1\nfinish_file = "{FINISH_FILE}"',
                             tb.config_toml(), flags=re.MULTILINE))
    assert 'kind = "oar"' in config.read_text()
    assert config.read_text().count("finish_file") == 2
    out = tmp_path / "run"
    stop, noted = threading.Event(), dict[str, float]()
    finisher = threading.Thread(target=_finish_once_all_ran, args=(tb, stop, noted),
                                daemon=True)
    finisher.start()
    try:
        code = main(["manager", "run", "--config", str(config), "--policy", "egs",
                     "--approach", "pwa", "--workload", "wm", "--jobs", str(JOBS), "--seed",
                     "3", "--time-scale", "0.05", "--poll", "1", "--deadline", "1200",
                     "--out", str(out), "--compare-sim", "--json"])
    finally:
        stop.set()
        finisher.join(timeout=60)
        for site in ("vu", "grid"):
            tb.exec(site, ["rm", "-f", FINISH_FILE], user="malleable", timeout=40)
    capsys.readouterr()
    assert code == 0
    with (out / "jobs.csv").open() as f:
        rows = list(csv.DictReader(f))
    with capsys.disabled():
        print(f"\nmixed: finish file {noted}, jobs "
              f"{[(r['job'], r['cluster'], r['start'], r['end'], r['resizes']) for r in rows]}")
    assert len(rows) == 12 and {r["state"] for r in rows} == {"completed"}
    assert {r["cluster"] for r in rows} == {"vu", "grid"}
    summary = json.loads((out / "summary.json").read_text())
    assert summary["completed"] == 12
    oar_resizes = sum(int(r["resizes"]) for r in rows if r["cluster"] == "grid")
    assert oar_resizes > 0, "no job was grown or shrunk on the OAR site"
    # A helper whose job ended during its hand-over stays COMPLETING in Slurm 22.05, with no
    # nodes, and only an administrator can remove it (docs/slurm.md, "Stray helpers"): the
    # run reports it in summary.json and leaves it. It may stay; nothing else may.
    ghosts = {int(h["helper"]) for h in summary["stray_helpers"]
              if h["site"] == "vu" and h["outcome"] == "completing"}
    wait_for(lambda: _oar_live(tb) == 0
             and all(job in ghosts and state == "CG" for job, state in _slurm_live(tb).items()),
             120, f"both queues to be empty after the run (but for the helpers the run reported "
             f"COMPLETING: {sorted(ghosts)})",
             explain=lambda: f"vu: {_slurm_live(tb)}; grid: {_oar_live(tb)} job(s)")
