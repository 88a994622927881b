"""CooRM real views on the testbed: a launcher picks among two real Slurm sites.

A local user's job fills every node of ``vu`` (time limit 10 min), so the CAP the
service sends for ``vu`` is busy for ~10 min while ``uva`` is free now: the
launcher's selection (the configuration that ends first) must pick ``uva``, and
its start must become a real Slurm job there. The launcher's command (the
application) then runs one process per node inside that job (``srun --jobid`` with
the id the ``startNotify`` carries), so the application really runs on uva's nodes.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

import malleable
from malleable.config import load_config
from malleable.coorm.client import LaunchResult, run_launcher
from malleable.coorm.core import CoreConfig
from malleable.coorm.launchers import Launcher
from malleable.coorm.real import SlurmCoorm, real_core
from malleable.coorm.service import CooRMService
from malleable.testbed import Testbed
from malleable.workloads.coorm_apps import Rigid
from tests.fakes.waits import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

SITES = ("vu", "uva")


def _busy(tb: Testbed) -> int:
    argv = ["squeue", "--noheader", "--format=%i", "--states=PENDING,RUNNING,CONFIGURING"]
    return sum(len(tb.exec(s, argv, check=True).stdout.split()) for s in SITES)


@pytest.fixture
def filled_vu(small_testbed: Testbed) -> Iterator[int]:
    """Every vu node taken by a local user's 10-minute job; everything cancelled after."""
    wait_for(lambda: _busy(small_testbed) == 0, 120, "an empty queue before the test")
    out = small_testbed.exec("vu", ["sbatch", "--parsable", "--nodes=4", "--exclusive",
                                    "--time=10", "--output=/dev/null", "--wrap", "sleep 600"],
                             user="malleable", check=True).stdout
    job = int(out.strip().split(";")[0])
    try:
        wait_for(lambda: _state(small_testbed, "vu", job).startswith("RUNNING"), 60,
                 "the background job running on vu")
        yield job
    finally:
        for site in SITES:
            small_testbed.exec(site, ["scancel", "--user=malleable"])
            small_testbed.exec(site, ["scancel", "--user=root"])
        wait_for(lambda: _busy(small_testbed) == 0, 60, "an empty queue after the test")


def _state(tb: Testbed, site: str, job: int) -> str:
    return tb.exec(site, ["squeue", "--noheader", "-j", str(job), "--format=%T"]).stdout.strip()


def _sacct(tb: Testbed, site: str, job: int) -> list[str]:
    out = tb.exec(site, ["sacct", "-X", "-n", "-P", "-j", str(job),
                         "--format=JobID,State,NNodes,NodeList,Start"], check=True).stdout
    return out.strip().split("|") if out.strip() else []


#: The application: wait for the Slurm job CooRM submitted, then one process per node in it.
APP = """
import os, sys, time
from pathlib import Path
from malleable.testbed import Testbed
name, root, out = sys.argv[1:4]
site, job = os.environ["COORM_SLURM_JOBS"].split()[0].split(":")
tb = Testbed(name, root=Path(root))
state = ""
for _ in range(60):
    state = tb.exec(site, ["squeue", "-h", "-j", job, "-o", "%T"]).stdout.strip()
    if state == "RUNNING":
        break
    time.sleep(0.5)
step = tb.exec(site, ["srun", "--jobid=" + job, "--overlap", "--nodes=2", "--ntasks=2",
                      "sh", "-c", "echo $SLURMD_NODENAME $SLURM_JOB_ID"], user="malleable",
              check=True)
Path(out).write_text(step.stdout)
"""


async def _run(core: SlurmCoorm, launcher: Launcher, command: Sequence[str]) -> LaunchResult:
    service = CooRMService(core)
    host, port = await service.start()
    try:
        return await asyncio.wait_for(run_launcher(host, port, launcher, command), 180)
    finally:
        await service.close()
        core.close()


def test_launcher_picks_the_free_real_site(small_testbed: Testbed, filled_vu: int,
                                           tmp_path: Path,
                                           monkeypatch: pytest.MonkeyPatch) -> None:
    config_file = tmp_path / "clusters.toml"
    config_file.write_text(small_testbed.config_toml())
    core = real_core(load_config(config_file), CoreConfig(0.5, 1.0, 5.0))
    assert [c.cid for c in core.platform.clusters] == list(SITES)
    assert all(c.hosts == 4 for c in core.platform.clusters)
    background = {b.cid: b for b in core.source.busy(0.0)}
    assert set(background) == {"vu"} and background["vu"].hosts == 4
    assert 400 < background["vu"].end <= 600 + 5  # end from the 10-min time limit

    launcher = Launcher("real", Rigid(hosts=2, runtime=20.0, walltime=60.0))
    (tmp_path / "app.py").write_text(APP)
    out = tmp_path / "ranks.txt"
    monkeypatch.setenv("PYTHONPATH", str(Path(malleable.__file__).parents[1]))
    command = [sys.executable, str(tmp_path / "app.py"), small_testbed.name,
               str(small_testbed.state.path.parent), str(out)]
    result = asyncio.run(_run(core, launcher, command))

    assert not result.killed and result.exit_code == 0
    assert set(result.rids) == {"uva"} and len(result.rids["uva"]) == 2
    assert launcher.caps["vu"][0][1] == 0  # the view showed vu full now
    assert [(s.site, s.nodes) for s in core.submissions] == [("uva", 2)]
    slurm_id = core.submissions[0].slurm_id
    ranks = sorted(out.read_text().split("\n")[:-1])
    assert len(ranks) == 2 and len({r.split()[0] for r in ranks}) == 2, ranks
    assert all(r.startswith("uva-") and r.endswith(f" {slurm_id}") for r in ranks), ranks

    def ran() -> bool:
        row = _sacct(small_testbed, "uva", slurm_id)
        return len(row) == 5 and row[4] not in ("", "Unknown", "None")

    wait_for(ran, 60, f"uva job {slurm_id} in accounting with a start time")
    _, state, nnodes, nodelist, _ = _sacct(small_testbed, "uva", slurm_id)
    assert nnodes == "2" and nodelist.startswith("uva")
    assert state.split()[0] in ("COMPLETED", "CANCELLED", "RUNNING"), state
    print(f"\nCooRM real: launcher chose uva; Slurm job {slurm_id}: {state} on {nodelist}; "
          f"the application's processes ran on {[r.split()[0] for r in ranks]}")


async def _serve_and_launch(config: Path, tb: Testbed) -> tuple[int, list[str], str]:
    """`coorm serve --config` + `coorm launch` as processes; SIGTERM the service mid-run."""
    env = dict(os.environ, PYTHONPATH=str(Path(malleable.__file__).parents[1]))
    server = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "malleable", "coorm", "serve", "--config", str(config),
        "--repolicy-interval", "0.5", "--fair-start", "1",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=env)
    launcher = None
    try:
        assert server.stdout is not None
        ready = json.loads(await asyncio.wait_for(server.stdout.readline(), 60.0))
        launcher = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "malleable", "coorm", "launch", "--connect",
            ready["listening"], "--hosts", "2", "--runtime", "300", "--walltime", "400",
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=env)
        held: list[str] = []
        for _ in range(120):  # the application's Slurm job on uva, running
            held = _jobs(tb, "uva", "RUNNING")
            if held:
                break
            await asyncio.sleep(0.5)
        server.send_signal(signal.SIGTERM)
        await asyncio.wait_for(server.wait(), 60.0)
        out, _ = await asyncio.wait_for(launcher.communicate(), 60.0)
        return launcher.returncode or 0, held, out.decode()
    finally:
        for proc in (server, launcher):
            if proc is not None and proc.returncode is None:
                proc.kill()
                await proc.wait()


def _jobs(tb: Testbed, site: str, states: str) -> list[str]:
    out = tb.exec(site, ["squeue", "--noheader", "--user=malleable", f"--states={states}",
                         "--format=%i %D"], check=True).stdout
    return out.split("\n")[:-1]


def test_cli_service_over_real_sites_cleans_up_on_sigterm(small_testbed: Testbed,
                                                          filled_vu: int,
                                                          tmp_path: Path) -> None:
    config_file = tmp_path / "clusters.toml"
    config_file.write_text(small_testbed.config_toml())
    rc, held, out = asyncio.run(_serve_and_launch(config_file, small_testbed))
    assert len(held) == 1 and held[0].split()[1] == "2", held  # 2 nodes held on uva
    # the service cancelled the held job when it stopped; the launcher saw it go
    wait_for(lambda: not _jobs(small_testbed, "uva", "PENDING,RUNNING,CONFIGURING"), 60,
             "the application's Slurm job cancelled when the service stopped")
    assert rc == 3, (rc, out)  # service gone: exit 3 (documented)
