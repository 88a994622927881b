"""A whole ``malleable manager run`` on an OAR site, killed with SIGKILL and run again.

One OAR site of 4 nodes. A 6-job KOALA workload (EGS under PWA, time scale 0.05) is
started as a real process; once OAR runs two of its jobs the process gets ``kill -9``;
the same command then takes the run up from its journal. Checks, from OAR itself
(``oarstat --sql`` lists ended jobs too): every workload job has exactly one base job
and it terminated, the resumed run reports 6 completed jobs and exits 0, and nothing of
the run is left in OAR's queue. Bounded by the test timeout; the module's testbed is
taken down after it.
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from malleable.testbed import Docker, Site, Testbed, Topology
from tests.fakes.waits import own_testbed, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

ROOT = Path(__file__).resolve().parents[2]
OAR4 = Topology("oar-run-restart", (Site("grid", 4, containers=1, kind="oar"),))


@pytest.fixture(scope="module")
def oar4(docker_engine: Docker, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Testbed]:
    yield from own_testbed("oarrun", OAR4, tmp_path_factory.mktemp("oar-run"), docker_engine)


def _run_jobs(tb: Testbed) -> dict[int, tuple[str, str]]:
    """Every OAR job (live or ended) of any managed run: id -> (name, state)."""
    out = tb.exec("grid", ["oarstat", "-J", "--sql", "job_name like 'm.%'"], user="malleable",
                  check=True, timeout=120).stdout
    return {int(k): (str(v["name"]), str(v["state"])) for k, v in json.loads(out or "{}").items()}


def test_a_killed_manager_run_on_oar_is_taken_up_without_loss_or_duplicate(
        oar4: Testbed, tmp_path: Path) -> None:
    config = tmp_path / "clusters.toml"
    config.write_text(oar4.config_toml())
    out = tmp_path / "run"
    argv = [sys.executable, "-m", "malleable", "manager", "run", "--config", str(config),
            "--policy", "egs", "--approach", "pwa", "--workload", "wm", "--jobs", "6",
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

    second = subprocess.run(argv, env=env, cwd=ROOT, capture_output=True, text=True,
                            timeout=700)
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
          f"({sum(1 for n, _ in jobs.values() if n.endswith('+'))} extension jobs)")
