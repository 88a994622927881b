"""The Slurm adapter against the real testbed (2 sites x 4 nodes + slurmdbd), once per Slurm
version of the matrix (22.05, 24.11, 26.05: the ``versioned_testbed`` fixture).

Every resize is checked twice: the adapter reads the job back itself, and the test reads
it again with ``scontrol`` through ``docker exec`` (not through the adapter's SSH).
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from malleable.adapters.shell import SSHRunner
from malleable.adapters.slurm import Outcome, Payload, Resizer, SlurmCluster
from malleable.adapters.slurm.parse import parse_scontrol_jobs, parse_sinfo_json
from malleable.adapters.slurm.sites import ctl_for
from malleable.cli import main
from malleable.clock import ScaledClock
from malleable.config import load_config
from malleable.model import JobKind, JobSpec, JobState
from malleable.testbed import Testbed
from tests.fakes.waits import clear_selection, site_state, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

SITE = "vu"


@pytest.fixture(scope="module")
def config_file(versioned_testbed: Testbed, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("slurm") / "clusters.toml"
    path.write_text(versioned_testbed.config_toml())
    return path


def scontrol_job(tb: Testbed, site: str, job_id: int) -> tuple[str, int, str]:
    """(state, nodes, node list) as ``scontrol`` shows them, read through docker exec."""
    out = tb.exec(site, ["scontrol", "-o", "show", "job", str(job_id)], check=True).stdout
    job = parse_scontrol_jobs(out)[0]
    return job.state_raw, job.nodes, job.node_list


def idle_nodes(tb: Testbed, site: str) -> int:
    out = tb.exec(site, ["sinfo", "--json"], check=True).stdout
    return sum(n.idle for n in parse_sinfo_json(out))


@pytest.fixture
def site(versioned_testbed: Testbed, config_file: Path) -> Iterator[SlurmCluster]:
    """A SlurmCluster on ``vu`` with its own run tag; cancels its jobs and waits on teardown."""
    # the session's shared testbed: modules before can leave nodes completing or coming back
    wait_for(lambda: idle_nodes(versioned_testbed, SITE) == 4, 240, "every vu node idle",
             explain=lambda: site_state(versioned_testbed, SITE))
    clear_selection(versioned_testbed, SITE)  # Slurm 22.05's select/linear after hand-overs
    config = load_config(config_file).site(SITE)
    cluster = SlurmCluster(SITE, ctl_for(config), ScaledClock(time.time(), 1.0),
                           f"it{secrets.token_hex(3)}", Payload(time_scale=1.0))
    yield cluster
    ids = [cluster.slurm_id(j) for j in list(cluster._mine)]
    for job_id in ids:
        if job_id is not None:
            versioned_testbed.exec(SITE, ["scancel", str(job_id)])
    cluster.ctl.runner.close()
    wait_for(lambda: idle_nodes(versioned_testbed, SITE) == 4, 60, "every vu node idle again",
             explain=lambda: site_state(versioned_testbed, SITE))


@pytest.fixture
def background(versioned_testbed: Testbed) -> Iterator[Callable[[int], int]]:
    """Submit a local user's job (not the manager's); cancelled and waited for on teardown."""
    made: list[int] = []

    def submit(nodes: int) -> int:
        out = versioned_testbed.exec(SITE, ["sbatch", "--parsable", f"--nodes={nodes}",
                                        "--exclusive", "--output=/dev/null", "--wrap",
                                        "sleep 300"], user="malleable", check=True).stdout
        made.append(int(out.strip().split(";")[0]))
        return made[-1]

    yield submit
    for job_id in made:
        versioned_testbed.exec(SITE, ["scancel", str(job_id)])
    for job_id in made:
        wait_for(lambda j=job_id: scontrol_job(versioned_testbed, SITE, j)[0] == "CANCELLED", 60,
                 f"background job {job_id} to end")


def _malleable(job_id: str, size: int) -> JobSpec:
    return JobSpec(job_id, JobKind.MALLEABLE, 1, 4, size, app="fixed", runtime=600.0)


def _started(cluster: SlurmCluster, job_id: str) -> None:
    def running() -> bool:
        return any(e.job_id == job_id and e.state is JobState.RUNNING
                   for e in cluster.drain_events()) or job_id in cluster.observe().running

    wait_for(running, 30, f"{job_id} to start")


def test_observe_sees_the_testbed_site(site: SlurmCluster) -> None:
    view = site.observe()
    assert (view.name, view.nodes, view.idle, view.pending) == (SITE, 4, 4, 0)
    assert isinstance(site.ctl.runner, SSHRunner)  # over SSH, host key checked


def test_shrink_twice_expand_twice_each_confirmed(site: SlurmCluster,
                                                  versioned_testbed: Testbed) -> None:
    assert site.start(_malleable("s1", 3), 3) == 3
    _started(site, "s1")
    job_id = site.slurm_id("s1")
    assert job_id is not None
    assert scontrol_job(versioned_testbed, SITE, job_id)[:2] == ("RUNNING", 3)
    steps = [("shrink", 1, 2), ("shrink", 1, 1), ("grow", 1, 2), ("grow", 2, 4)]
    for verb, amount, size in steps:
        if verb == "shrink":
            assert site.request_shrink("s1", amount, mandatory=True) == amount
        else:
            # as the manager does, offer only nodes Slurm shows idle: nodes a shrink
            # released a moment ago can still be completing (a loaded CI machine)
            wait_for(lambda n=amount: idle_nodes(versioned_testbed, SITE) >= n, 60,
                     f"{amount} idle vu nodes", explain=lambda: site_state(versioned_testbed, SITE))
            assert site.offer_grow("s1", amount) == amount, site_state(versioned_testbed, SITE)
        result = site.resizes[-1]
        assert (result.outcome, result.after) == (Outcome.DONE, size), result.describe()
        state, nodes, node_list = scontrol_job(versioned_testbed, SITE, job_id)
        assert (state, nodes) == ("RUNNING", size), f"after {verb} to {size}: {node_list}"
        assert node_list == result.nodes_after
    sizes = [e.size for e in site.drain_events() if e.job_id == "s1"]
    assert sizes == [2, 1, 2, 4]
    assert site.observe().running["s1"].size == 4
    # the job is still healthy after four resizes (no "Job credential revoked")
    time.sleep(1.0)
    assert scontrol_job(versioned_testbed, SITE, job_id)[0] == "RUNNING"


def test_refused_expansion_is_reported(site: SlurmCluster, versioned_testbed: Testbed,
                                       background: Callable[[int], int]) -> None:
    assert site.start(_malleable("r1", 2), 2) == 2
    _started(site, "r1")
    other = background(2)
    wait_for(lambda: scontrol_job(versioned_testbed, SITE, other)[0] == "RUNNING", 30,
             "the background job to run", explain=lambda: site_state(versioned_testbed, SITE))
    site.resizer = Resizer(site.ctl, run_tag=site.run_id, expand_wait=1.0)
    assert site.offer_grow("r1", 1) == 0
    result = site.resizes[-1]
    assert result.outcome is Outcome.REFUSED and result.after == 2
    assert "Unable to allocate resources" in result.reason
    job_id = site.slurm_id("r1")
    assert job_id is not None
    assert scontrol_job(versioned_testbed, SITE, job_id)[:2] == ("RUNNING", 2)
    queue = versioned_testbed.exec(SITE, ["squeue", "--noheader", "--format=%i %T %j"],
                               check=True).stdout
    assert "m.helper" not in queue  # the helper allocation did not linger
    view = site.observe()
    assert view.idle == 0 and view.running[f"slurm:{SITE}:{other}"].managed is False


def test_resize_command(site: SlurmCluster, versioned_testbed: Testbed, config_file: Path,
                        capsys: pytest.CaptureFixture[str],
                        background: Callable[[int], int]) -> None:
    assert site.start(_malleable("c1", 2), 2) == 2
    _started(site, "c1")
    job_id = site.slurm_id("c1")
    assert job_id is not None
    base = ["resize", "--config", str(config_file), "--site", SITE]
    assert main([*base, str(job_id), "1"]) == 0
    assert "2 -> 1 nodes (asked 1): done" in capsys.readouterr().out
    assert main([*base, str(job_id), "3"]) == 0
    assert scontrol_job(versioned_testbed, SITE, job_id)[:2] == ("RUNNING", 3)
    background(1)
    wait_for(lambda: idle_nodes(versioned_testbed, SITE) == 0, 30, "the site to be full")
    assert main([*base, "--expand-wait", "1", str(job_id), "4"]) == 3
    err = capsys.readouterr().err
    assert "refused" in err and "Unable to allocate resources" in err
    assert scontrol_job(versioned_testbed, SITE, job_id)[:2] == ("RUNNING", 3)
    assert main([*base, "999999", "2"]) == 2
    assert "not known to Slurm" in capsys.readouterr().err
