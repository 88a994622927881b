"""A whole ``malleable manager run`` on an OAR site, killed with SIGKILL and run again.

One OAR site of 4 nodes. A 6-job KOALA workload (EGS under PWA, time scale 0.05) is
started as a real process; once OAR runs two of its jobs the process gets ``kill -9``;
the same command then takes the run up from its journal. Checks, from OAR itself
(``oarstat --sql`` lists ended jobs too): every workload job has exactly one base job
and it terminated, the resumed run reports 6 completed jobs and exits 0, and nothing of
the run is left in OAR's queue. Once the resumed run has all 6 jobs seen running, the
site's ``finish_file`` (docs/oar.md) ends the work they have left. Bounded by the test
timeout; the module's testbed is taken down after it.
"""

from __future__ import annotations

import contextlib
import csv
import json
import os
import re
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from malleable.testbed import Docker, Site, Testbed, Topology
from tests.fakes.waits import own_testbed, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

ROOT = Path(__file__).resolve().parents[2]
OAR4 = Topology("oar-run-restart", (Site("grid", 4, containers=1, kind="oar"),))
JOBS = 6
#: the site's ``finish_file``: created once the resumed run has had each job running
FINISH_FILE = "/home/malleable/oar-run-restart.finish"
#: a workload job's base job (``m.RUN.JOB``; its extensions add ``+``)
NAME = re.compile(r"^m\.\w+\.(wm-\d+)$")


@pytest.fixture(scope="module")
def oar4(docker_engine: Docker, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Testbed]:
    yield from own_testbed("oarrun", OAR4, tmp_path_factory.mktemp("oar-run"), docker_engine)


def _run_jobs(tb: Testbed) -> dict[int, tuple[str, str]]:
    """Every OAR job (live or ended) of any managed run: id -> (name, state)."""
    out = tb.exec("grid", ["oarstat", "-J", "--sql", "job_name like 'm.%'"], user="malleable",
                  check=True, timeout=120).stdout
    return {int(k): (str(v["name"]), str(v["state"])) for k, v in json.loads(out or "{}").items()}


def _finish_once_all_ran(tb: Testbed, stop: threading.Event, noted: dict[str, float]) -> None:
    """Create the finish file once each of the run's jobs has been seen running (a failed
    poll ends the watch, never the test: the jobs then run to their end)."""
    seen: set[str] = set()
    began = time.monotonic()
    with contextlib.suppress(Exception):
        while not stop.wait(1.0):
            jobs = json.loads(tb.exec("grid", ["oarstat", "-J"], check=True).stdout or "{}")
            names = [str(job["name"]) for job in jobs.values() if job["state"] == "Running"]
            seen |= {m.group(1) for m in map(NAME.match, names) if m}
            if len(seen) == JOBS:
                tb.exec("grid", ["touch", FINISH_FILE], user="malleable", timeout=40,
                        check=True)
                noted["finish_at_s"] = time.monotonic() - began
                return


def test_a_killed_manager_run_on_oar_is_taken_up_without_loss_or_duplicate(
        oar4: Testbed, tmp_path: Path) -> None:
    oar4.exec("grid", ["rm", "-f", FINISH_FILE], user="malleable", timeout=40, check=True)
    config = tmp_path / "clusters.toml"
    config.write_text(re.sub(r"^(\[clusters\.grid\])$", rf'\1\nfinish_file = "{FINISH_FILE}"',
                             oar4.config_toml(), flags=re.MULTILINE))
    assert config.read_text().count("finish_file") == 1
    out = tmp_path / "run"
    argv = [sys.executable, "-m", "malleable", "manager", "run", "--config", str(config),
            "--policy", "egs", "--approach", "pwa", "--workload", "wm", "--jobs", str(JOBS),
            "--seed", "3", "--time-scale", "0.05", "--poll", "1", "--deadline", "600",
            "--out", str(out), "--json"]
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))
    first = subprocess.Popen(argv, env=env, cwd=ROOT, stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE, text=True)
    try:
        started = lambda: sum(1 for _, state in _run_jobs(oar4).values()  # noqa: E731
                              if state in ("Running", "Finishing", "Terminated"))
        wait_for(lambda: started() >= 2 or first.poll() is not None, 300,
                 "OAR to run two of the workload's jobs", interval=1.0)
        assert first.poll() is None, f"the run ended before the kill: {first.stderr.read()}"
        first.kill()  # SIGKILL: nothing flushed, nothing closed
        assert first.wait(30) == -9
    finally:
        if first.poll() is None:
            first.kill()
        first.stderr.close()  # type: ignore[union-attr]
    at_kill = _run_jobs(oar4)

    stop, noted = threading.Event(), dict[str, float]()
    finisher = threading.Thread(target=_finish_once_all_ran, args=(oar4, stop, noted),
                                daemon=True)
    finisher.start()
    try:
        second = subprocess.run(argv, env=env, cwd=ROOT, capture_output=True, text=True,
                                timeout=700)
    finally:
        stop.set()
        finisher.join(timeout=60)
        oar4.exec("grid", ["rm", "-f", FINISH_FILE], user="malleable", timeout=40)
    assert second.returncode == 0, second.stderr[-2000:]
    with (out / "jobs.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert [r["state"] for r in rows] == ["completed"] * 6, rows
    run_id = json.loads((out / "summary.json").read_text())["run_id"]

    jobs = {i: job for i, job in _run_jobs(oar4).items() if job[0].startswith(f"m.{run_id}.")}
    bases = Counter(name for name, _ in jobs.values() if not name.endswith("+"))
    assert bases == Counter({f"m.{run_id}.{r['job']}": 1 for r in rows}), (bases, at_kill)
    assert {state for name, state in jobs.values() if not name.endswith("+")} == \
        {"Terminated"}, jobs
    wait_for(lambda: all(state in ("Terminated", "Error") for _, state in
                         _run_jobs(oar4).values()), 120, "nothing of the run left in OAR",
             interval=2.0)
    print(f"\nat the kill: {sorted(at_kill.values())}; after: {len(jobs)} OAR jobs of the run "
          f"({sum(1 for n, _ in jobs.values() if n.endswith('+'))} extension jobs); finish "
          f"file {noted}; jobs {[(r['job'], r['start'], r['end']) for r in rows]}")
