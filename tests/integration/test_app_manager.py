"""The manager with DMRlib's rule driving a real malleable MPI job on the testbed.

A malleable Jacobi (1..6 processes, preferred 2) starts on 2 of 6 free nodes: the
rule expands it onto the free nodes. When a rigid job of 3 nodes waits, the rule
shrinks it toward its preferred size so that the waiting job can start. Sizes are
read back with ``scontrol`` through ``docker exec``.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from malleable.adapters.slurm.cluster import SlurmCluster
from malleable.adapters.slurm.parse import parse_scontrol_jobs
from malleable.adapters.slurm.sites import ctl_for
from malleable.config import load_config
from malleable.manager import Manager
from malleable.model import JobKind, JobSpec
from malleable.policies.dmr import DmrPolicy
from malleable.realtime import ScaledClock
from malleable.runner.demo import example_source
from malleable.runner.launch import Launch
from malleable.runner.nodes import NodeShell
from malleable.runner.site import MpiPayload, MpiSite
from malleable.testbed import Site, Testbed, Topology
from tests.integration.helpers import TestbedFactory, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

SITE = "app"
TOPOLOGY = Topology("mpiapp", (Site(SITE, 6, 3),))


@pytest.fixture(scope="module")
def testbed(testbed_factory: TestbedFactory) -> Testbed:
    return testbed_factory(TOPOLOGY)


@pytest.fixture(scope="module")
def config_file(testbed: Testbed, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("appmgr") / "clusters.toml"
    path.write_text(testbed.config_toml())
    return path


def programs(spec: JobSpec) -> Launch | None:
    if spec.app != "mpi:jacobi":
        return None
    name, text = example_source("jacobi")
    return Launch(name, text, ("--iterations", "3000", "--size", "64", "--delay", "0.1",
                               "--min", "1", "--max", "6", "--preferred", "2"))


@pytest.fixture
def site(config_file: Path) -> Iterator[MpiSite]:
    config = load_config(config_file).site(SITE)
    ctl = ctl_for(config)
    cluster = SlurmCluster(SITE, ctl, ScaledClock(time.time(), 1.0),
                           f"it{secrets.token_hex(3)}",
                           MpiPayload(time_scale=1.0, programs=programs))
    mpi_site = MpiSite(cluster, NodeShell(ctl.runner), programs)
    yield mpi_site
    for job_id in list(mpi_site.jobs):
        mpi_site.cancel(job_id)
    for job_id in ("b",):
        cluster.cancel(job_id)
    ctl.runner.close()


def slurm_nodes(tb: Testbed, slurm_id: int | None) -> tuple[str, int]:
    out = tb.exec(SITE, ["scontrol", "-o", "show", "job", str(slurm_id)], check=True).stdout
    job = parse_scontrol_jobs(out)[0]
    return job.state_raw, job.nodes


def cycle_until(manager: Manager, clock: ScaledClock, done: object, timeout: float,
                what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        manager.cycle(clock.now())
        if done():  # type: ignore[operator]
            return
        time.sleep(1.0)
    pytest.fail(f"timed out after {timeout:g} s waiting for {what}")


def test_dmr_grows_on_free_nodes_and_shrinks_toward_preferred_for_a_waiting_job(
        testbed: Testbed, site: MpiSite) -> None:
    clock = site.cluster.clock
    assert isinstance(clock, ScaledClock)
    manager = Manager(DmrPolicy(), {SITE: site})
    a = JobSpec("a", JobKind.MALLEABLE, 1, 6, 2, app="mpi:jacobi", preferred_size=2)
    manager.submit(a)
    cycle_until(manager, clock, lambda: site.cluster.slurm_id("a") is not None
                and slurm_nodes(testbed, site.cluster.slurm_id("a"))[1] == 6, 240,
                "the DMR rule to expand job a onto the 4 free nodes")
    job = site.jobs["a"]
    assert job.size == 6
    wait_for(lambda: (job.progress() or {}).get("size") == 6, 60, "6 processes at work")
    b = JobSpec("b", JobKind.RIGID, 3, 3, 3, app="fixed", runtime=120.0)
    manager.submit(b)
    cycle_until(manager, clock, lambda: site.cluster.slurm_id("b") is not None
                and slurm_nodes(testbed, site.cluster.slurm_id("b"))[0] == "RUNNING", 240,
                "the waiting job to start after job a shrank")
    assert slurm_nodes(testbed, site.cluster.slurm_id("a")) == ("RUNNING", 3)
    assert job.size == 3  # 3 processes on the 3 nodes it kept
    wait_for(lambda: (job.progress() or {}).get("size") == 3, 60, "3 processes at work")
    ops = [(op.kind, op.job_id, op.amount) for op in manager.operations]
    assert ("grow", "a", 4) in ops and ("shrink", "a", 3) in ops and ("place", "b", 3) in ops
