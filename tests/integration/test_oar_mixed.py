"""One manager over a Slurm site and an OAR site of one testbed (``manager run``).

A mixed topology (Slurm ``vu`` and OAR ``grid``, 4 nodes each) comes up; its status and
clusters config report each site's kind; a 12-job KOALA workload (time scale 0.05,
EGS under PWA) runs over both sites. Checks: every job completes, jobs ran on both
kinds, the OAR site's jobs grew or shrank through the emulation, and nothing is left in
either queue. Bounded by the test timeout; the module's testbed is taken down after it
(not at the session's end: one OAR testbed up at a time).
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from malleable.cli import main
from malleable.testbed import Docker, Site, Testbed, Topology
from tests.fakes.waits import own_testbed, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(1500)]

MIXED = Topology("mixed-small", (Site("vu", 4), Site("grid", 4, kind="oar")))


def _oar_live(tb: Testbed) -> int:
    out = tb.exec("grid", ["oarstat", "-J"], check=True).stdout
    return len(json.loads(out or "{}"))


def _slurm_live(tb: Testbed) -> int:
    return len(tb.exec("vu", ["squeue", "--noheader", "--format=%i"], check=True).stdout.split())


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
    config = tmp_path / "clusters.toml"
    config.write_text(tb.config_toml())
    assert 'kind = "oar"' in config.read_text()
    out = tmp_path / "run"
    code = main(["manager", "run", "--config", str(config), "--policy", "egs", "--approach",
                 "pwa", "--workload", "wm", "--jobs", "12", "--seed", "3", "--time-scale",
                 "0.05", "--poll", "1", "--deadline", "1200", "--out", str(out),
                 "--compare-sim", "--json"])
    capsys.readouterr()
    assert code == 0
    with (out / "jobs.csv").open() as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 12 and {r["state"] for r in rows} == {"completed"}
    assert {r["cluster"] for r in rows} == {"vu", "grid"}
    summary = json.loads((out / "summary.json").read_text())
    assert summary["completed"] == 12
    oar_resizes = sum(int(r["resizes"]) for r in rows if r["cluster"] == "grid")
    assert oar_resizes > 0, "no job was grown or shrunk on the OAR site"
    wait_for(lambda: _oar_live(tb) == 0 and _slurm_live(tb) == 0, 120,
             "both queues to be empty after the run")
