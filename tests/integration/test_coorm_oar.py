"""CooRM real views over an OAR site and a Slurm site of one testbed.

A local job fills the Slurm site ``vu`` (2 nodes, 10-minute limit) and another holds one
of the OAR site ``grid``'s two nodes (``walltime=0:10:00``). The service's views must say
so: vu full until its job's time limit, grid one host short until its job's ``startTime``
+ wall time, read from ``oarstat``. A rigid one-host application then fits only on grid
now: its start must become an OAR job there, on the node the background job does not
hold, and the application (the launcher's command) must find that job running through
``COORM_JOBS``. Bounded by the test timeout; the module's testbed is taken down after its
last test.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path

import pytest

import malleable
from malleable.adapters.oar.sites import oar_ctl_for
from malleable.config import load_config
from malleable.coorm.client import LaunchResult, run_launcher
from malleable.coorm.core import CoreConfig
from malleable.coorm.launchers import Launcher
from malleable.coorm.protocol import Change
from malleable.coorm.real import RealCoorm, real_core
from malleable.coorm.service import CooRMService
from malleable.testbed import Docker, Site, Testbed, Topology
from malleable.workloads.coorm_apps import Rigid
from tests.fakes.waits import own_testbed, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

#: The smallest topology with both kinds: one compute container per site.
MIXED_TINY = Topology("coorm-mixed", (Site("vu", 2, containers=1),
                                      Site("grid", 2, containers=1, kind="oar")))


def _oar_jobs(tb: Testbed, *ids: int) -> dict[int, dict[str, object]]:
    argv = ["oarstat", "-fJ", *(a for i in ids for a in ("-j", str(i)))] if ids else \
        ["oarstat", "-J"]
    out = tb.exec("grid", argv, check=True).stdout
    return {int(k): v for k, v in json.loads(out or "{}").items()}


def _slurm_live(tb: Testbed) -> list[str]:
    return tb.exec("vu", ["squeue", "--noheader", "--format=%i"], check=True).stdout.split()


@pytest.fixture(scope="module")
def tiny(docker_engine: Docker, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Testbed]:
    yield from own_testbed("coormoar", MIXED_TINY, tmp_path_factory.mktemp("coorm-oar"),
                           docker_engine)


@pytest.fixture
def mixed(tiny: Testbed, tmp_path: Path) -> Iterator[tuple[Testbed, Path]]:
    tb = tiny
    config = tmp_path / "clusters.toml"
    config.write_text(tb.config_toml())  # 120 s per OAR command (the testbed's default)
    try:
        yield tb, config
    finally:
        live = list(_oar_jobs(tb))
        if live:
            tb.exec("grid", ["oardel", *map(str, live)], user="malleable")
        tb.exec("vu", ["scancel", "--user=malleable"])
        wait_for(lambda: not _oar_jobs(tb) and not _slurm_live(tb), 300,
                 "both queues empty after the test")


def _background(tb: Testbed, config: Path) -> tuple[int, int]:
    """A 10-minute job on every vu node (Slurm) and on one grid node (OAR)."""
    out = tb.exec("vu", ["sbatch", "--parsable", "--nodes=2", "--exclusive", "--time=10",
                         "--output=/dev/null", "--wrap", "sleep 600"],
                  user="malleable", check=True).stdout
    slurm = int(out.strip().split(";")[0])
    ctl = oar_ctl_for(load_config(config).site("grid"))
    (oar,) = ctl.submit(["-n", "local", "-l", "nodes=1,walltime=0:10:00"], "sleep 600")
    wait_for(lambda: _oar_jobs(tb, oar)[oar]["state"] == "Running", 120,
             "the OAR background job running")
    wait_for(lambda: tb.exec("vu", ["squeue", "-h", "-j", str(slurm), "-o", "%T"]
                             ).stdout.strip() == "RUNNING", 120, "the Slurm background job")
    return slurm, oar


#: The application: find its OAR job (COORM_JOBS) running and write where it runs.
APP = """
import json, os, sys, time
from pathlib import Path
from malleable.testbed import Testbed
name, root, out = sys.argv[1:4]
site, job = os.environ["COORM_JOBS"].split()[0].split(":")
tb = Testbed(name, root=Path(root))
for _ in range(120):
    doc = json.loads(tb.exec(site, ["oarstat", "-fJ", "-j", job]).stdout or "{}")[job]
    if doc["state"] == "Running":
        break
    time.sleep(0.5)
Path(out).write_text(json.dumps({"site": site, "job": int(job), "state": doc["state"],
                                 "nodes": doc["assigned_network_address"]}))
"""


class Recording(Launcher):
    """A launcher that keeps every view it received, per cluster."""

    def __init__(self, *args: object, **kwargs: object) -> None:
        super().__init__(*args, **kwargs)  # type: ignore[arg-type]
        self.seen: dict[str, list[tuple[tuple[float, int], ...]]] = {}

    def apply(self, changes: Iterable[Change]) -> bool:
        changes = list(changes)
        for ch in changes:
            if ch.cap is not None:
                self.seen.setdefault(ch.cid, []).append(tuple(ch.cap))
        return super().apply(changes)


async def _run(core: RealCoorm, launcher: Launcher, command: list[str]) -> LaunchResult:
    service = CooRMService(core)
    host, port = await service.start()
    try:
        return await asyncio.wait_for(run_launcher(host, port, launcher, command), 420)
    finally:
        await service.close()
        core.close()


def test_coorm_views_and_starts_on_an_oar_site(mixed: tuple[Testbed, Path], tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    tb, config = mixed
    _, oar_bg = _background(tb, config)
    bg_node = _oar_jobs(tb, oar_bg)[oar_bg]["assigned_network_address"]

    core = real_core(load_config(config), CoreConfig(0.5, 1.0, 5.0))
    assert [(c.cid, c.hosts) for c in core.platform.clusters] == [("vu", 2), ("grid", 2)]
    background = {b.cid: b for b in core.source.busy(0.0)}
    assert background["vu"].hosts == 2 and 400 < background["vu"].end <= 605
    assert background["grid"].hosts == 1
    assert 400 < background["grid"].end <= 605  # startTime + walltime, from oarstat -J

    launcher = Recording("oar", Rigid(hosts=1, runtime=20.0, walltime=60.0))
    (tmp_path / "app.py").write_text(APP)
    out = tmp_path / "where.json"
    monkeypatch.setenv("PYTHONPATH", str(Path(malleable.__file__).parents[1]))
    command = [sys.executable, str(tmp_path / "app.py"), tb.name, str(tb.state.path.parent),
               str(out)]
    result = asyncio.run(_run(core, launcher, command))

    assert not result.killed and result.exit_code == 0, result
    assert set(result.rids) == {"grid"} and len(result.rids["grid"]) == 1
    assert launcher.seen["vu"][0][0][1] == 0  # vu full now
    grid_cap = launcher.seen["grid"][0]  # the view the launcher chose on
    assert grid_cap[0][1] == 1 and grid_cap[-1][1] == 2, grid_cap  # one free until ~600 s
    assert 400 < grid_cap[-1][0] <= 605, grid_cap
    assert [(s.site, s.nodes) for s in core.submissions] == [("grid", 1)]
    job = core.submissions[0].native_id
    where = json.loads(out.read_text())
    assert where["job"] == job and where["state"] == "Running", where
    assert len(where["nodes"]) == 1 and where["nodes"] != bg_node, (where, bg_node)
    assert where["nodes"][0].startswith("grid-n")
    wait_for(lambda: _oar_jobs(tb, job)[job]["state"] in ("Terminated", "Error"), 120,
             f"CooRM's OAR job {job} ended after the application's done")
    print(f"\nCooRM over OAR: grid CAP {grid_cap}; OAR job {job} on {where['nodes']} "
          f"(background on {bg_node})")
