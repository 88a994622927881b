"""A malleable MPI application (examples/jacobi.py) grows on an OAR site.

The runner submits Jacobi as an OAR job on 2 of the site's 4 nodes (two containers);
at iteration 15 it grows to 4: two extension jobs, whose ``assigned_network_address``
gives the new hosts, then the offer; the program takes them, and the processes and the
OAR collection (base + running extensions) are 4. Once 4 processes are seen at work,
``0`` in its ``--delay-file`` lets the iterations left run without their delay. The run
ends with the checksum of a fixed run on 2 nodes (``--delay 0``: the delay is a sleep after
each iteration, it changes no result; 22 s less to wait). Bounded by the test
timeout; the module's one testbed is taken down when its tests are done, every OAR job
deleted after each test.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from malleable.adapters.oar.sites import oar_ctl_for
from malleable.config import SiteConfig, load_config
from malleable.runner.demo import example_source, run_schedule
from malleable.runner.launch import Launch
from malleable.runner.oar import OarMpiJob, oar_mpi_job
from malleable.testbed import Docker, Site, Testbed, Topology
from tests.fakes.waits import own_testbed, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

OAR4 = Topology("oar-mpi", (Site("grid", 4, containers=2, kind="oar"),))
#: 150 iterations: the grow is asked at iteration 15 and OAR starts the extension jobs
#: in its own scheduling rounds. With 60, a CI run's program took the offer near its end
#: and had finished by the time the test read the collection back (0 nodes, not 4).
JACOBI = ("--iterations", "150", "--size", "96", "--delay", "0.15", "--max", "4")
#: the malleable run's ``--delay-file`` (in the user's home, the site's shared /home):
#: ``0`` once it is seen at 4 processes, the last thing checked before its end
DELAY_FILE = "jacobi-grown.delay"


def _live(tb: Testbed) -> list[int]:
    out = tb.exec("grid", ["oarstat", "-J"], check=True).stdout
    return [int(k) for k in json.loads(out or "{}")]


@pytest.fixture(scope="module")
def oar4(docker_engine: Docker, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Testbed]:
    yield from own_testbed("oarmpi", OAR4, tmp_path_factory.mktemp("oar-mpi"), docker_engine)


@pytest.fixture
def grid(oar4: Testbed, tmp_path: Path) -> Iterator[tuple[Testbed, SiteConfig]]:
    tb = oar4
    config = tmp_path / "clusters.toml"
    config.write_text(tb.config_toml())  # 120 s per OAR command
    try:
        yield tb, load_config(config).site("grid")
    finally:
        live = _live(tb)
        if live:
            tb.exec("grid", ["oardel", *map(str, live)], user="malleable")
        wait_for(lambda: not _live(tb), 300, "the OAR queue empty after the test")


def _user(site: SiteConfig) -> str:
    return site.ssh.user if site.ssh is not None else "malleable"


def _job(site: SiteConfig, made: list[OarMpiJob], *extra: str) -> OarMpiJob:
    name, text = example_source("jacobi")
    job = oar_mpi_job(oar_ctl_for(site), Launch(name, text, (*JACOBI, *extra)),
                      f"/home/{_user(site)}", walltime="0:20:00")
    made.append(job)
    return job


def test_jacobi_grows_on_oar_and_ends_with_the_fixed_checksum(
        grid: tuple[Testbed, SiteConfig]) -> None:
    tb, site = grid
    made: list[OarMpiJob] = []
    user = _user(site)
    delay_file = f"/home/{user}/{DELAY_FILE}"
    tb.exec("grid", ["rm", "-f", delay_file], user=user, timeout=40, check=True)
    try:
        job = _job(site, made, "--delay-file", delay_file)
        job.submit(2)
        job.wait_started(300)
        assert job.size == 2
        wait_for(lambda: int((job.progress() or {}).get("iteration", 0)) >= 15, 300,
                 "Jacobi at iteration 15", explain=job.describe)
        grow = job.resize_to(4)
        assert (grow.after, grow.error) == (4, ""), grow
        assert job.exit_code() is None, (f"the program ended before its collection could be "
                                         f"read back; the grow took {grow.seconds:.1f} s")
        assert len(job.extensions) == 2 and len(job.allocation()) == 4  # base 2 + 2 extensions
        hosts = {host for _, host in job.nodes}
        assert hosts == {"grid-c0", "grid-c1"}, job.nodes  # the new ranks span both containers
        wait_for(lambda: (job.progress() or {}).get("size") == 4, 120, "4 processes at work")
        tb.exec("grid", ["sh", "-c", 'echo 0 > "$1"', "sh", delay_file], user=user,
                timeout=40, check=True)
        undelayed = time.monotonic()
        assert job.wait_finished(600) == 0
        undelayed = time.monotonic() - undelayed
        malleable = job.result() or {}
        assert [p["size"] for p in malleable["phases"]] == [2, 4]
        wait_for(lambda: not _live(tb), 120, "the base job and its extensions ended")

        fixed = _job(site, made, "--delay", "0")  # argparse: the last --delay holds
        reference = time.monotonic()
        run = run_schedule(fixed, [2], 60, 600)
        reference = time.monotonic() - reference
        assert run.exit_code == 0 and [p["size"] for p in run.phases] == [2]
        assert math.isclose(malleable["checksum"], run.checksum or 0.0, rel_tol=1e-12)
        print(f"\nJacobi on OAR: grew 2 -> 4 in {grow.seconds:.1f} s (extensions "
              f"{sorted(job.extensions.values())}); checksum {malleable['checksum']!r} = "
              f"fixed {run.checksum!r}; the grown run ended {undelayed:.1f} s after its "
              f"delay was set to 0; the fixed run took {reference:.1f} s")
    finally:
        for made_job in made:
            made_job.cancel(timeout=30)
        tb.exec("grid", ["rm", "-f", delay_file], user=user, timeout=40)
