"""Malleable MPI programs on the real testbed: one site of 6 nodes in 3 containers.

Every allocation is read back through ``docker exec`` (scontrol, sinfo, squeue, ps),
not through the runner's own SSH connection. The last test runs the manager with
DMRlib's rule: a malleable Jacobi (1..6 processes, preferred 2) starts on 2 of 6
free nodes and is expanded onto the free ones; when a rigid job of 3 nodes waits,
it is shrunk toward its preferred size so that the waiting job can start. The last
one runs the manager with FCFS, which never grows a job: a Jacobi that asks, at an
iteration of its choosing, for 4 processes is grown to 4 from the free nodes (its
request honoured as a voluntary grow), and ends with the fixed-size result.
"""

from __future__ import annotations

import math
import secrets
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from malleable.adapters.slurm.cluster import SlurmCluster
from malleable.adapters.slurm.parse import parse_scontrol_jobs, parse_sinfo_json
from malleable.adapters.slurm.sites import ctl_for
from malleable.cli import main
from malleable.clock import ScaledClock
from malleable.config import SiteConfig, load_config
from malleable.manager import Manager
from malleable.model import JobKind, JobSpec
from malleable.policies.dmr import DmrPolicy
from malleable.policies.fcfs import FCFS
from malleable.runner.demo import example_source, run_schedule
from malleable.runner.job import MpiJob
from malleable.runner.launch import Launch
from malleable.runner.nodes import NodeShell
from malleable.runner.site import MpiPayload, MpiSite
from malleable.testbed import Site, Testbed, Topology
from tests.fakes.waits import TestbedFactory, site_state, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

SITE = "app"
TOPOLOGY = Topology("mpiapp", (Site(SITE, 6, 3),))


@pytest.fixture(scope="module")
def testbed(testbed_factory: TestbedFactory) -> Testbed:
    return testbed_factory(TOPOLOGY)


@pytest.fixture(scope="module")
def config_file(testbed: Testbed, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("app") / "clusters.toml"
    path.write_text(testbed.config_toml())
    return path


@pytest.fixture
def site(config_file: Path) -> SiteConfig:
    return load_config(config_file).site(SITE)


@pytest.fixture
def jobs(site: SiteConfig, testbed: Testbed) -> Iterator[list[MpiJob]]:
    """MpiJobs of a test; cancelled on teardown, and the site checked clean again."""
    made: list[MpiJob] = []
    yield made
    for job in made:
        job.cancel()
        job.ctl.runner.close()
    wait_for(lambda: idle(testbed) == 6, 60, "every node idle again after the test")


def new_job(site: SiteConfig, example: str, args: tuple[str, ...], made: list[MpiJob]) -> MpiJob:
    ctl = ctl_for(site)
    name, text = example_source(example)
    job = MpiJob(ctl, NodeShell(ctl.runner), Launch(name, text, args))
    made.append(job)
    return job


def scontrol(tb: Testbed, job_id: int) -> tuple[str, int]:
    out = tb.exec(SITE, ["scontrol", "-o", "show", "job", str(job_id)], check=True).stdout
    job = parse_scontrol_jobs(out)[0]
    return job.state_raw, job.nodes


def idle(tb: Testbed) -> int:
    return sum(n.idle for n in parse_sinfo_json(tb.exec(SITE, ["sinfo", "--json"],
                                                        check=True).stdout))


def stray_processes(tb: Testbed, needle: str) -> list[str]:
    found = []
    for container in (f"{SITE}-c0", f"{SITE}-c1", f"{SITE}-c2"):
        out = tb.exec(container, ["ps", "-eo", "args="], check=True).stdout
        found += [f"{container}: {line}" for line in out.splitlines()
                  if needle in line and not line.startswith("ps ")]
    return found


def mpirun_rc(job: MpiJob) -> str:
    """mpirun's own exit code (the job's outcome may forgive a crash after the result)."""
    return (job.shell.read(job.batch, f"{job.run_dir}/ch/mpirun_rc") or "").strip()


def wait_progress(job: MpiJob, iteration: int) -> None:
    """Wait until the program reports ``iteration``; fail at once, saying what the job left
    behind, if mpirun has ended before."""
    def reached() -> bool:
        if int((job.progress() or {}).get("iteration", 0)) >= iteration:
            return True
        if job.exit_code() is not None:
            pytest.fail(f"the program ended before iteration {iteration}: {job.describe()}")
        return False

    wait_for(reached, 120, f"the program to reach iteration {iteration}",
             explain=job.describe)


JACOBI = ("--iterations", "60", "--size", "96", "--delay", "0.15", "--max", "6")
#: The grow-and-shrink Jacobi: the shrink is offered from iteration 35 on, and the program
#: must still be running when it reads the offer. With 60 iterations only 25 (about 4 s)
#: were left, which a loaded machine (SSH round trips, the grow's spawn) can eat up.
RESIZED_ITERATIONS = 100
RESIZED = ("--iterations", str(RESIZED_ITERATIONS), *JACOBI[2:])


def undelayed(args: tuple[str, ...]) -> tuple[str, ...]:
    """The same program without ``--delay`` (a sleep after each iteration, nothing else:
    ``malleable.mpi.demo.slowed``): the fixed reference runs compute the same checksum
    without waiting out a delay only the malleable run needs (15-24 s each)."""
    at = args.index("--delay")
    return (*args[:at], "--delay", "0", *args[at + 2:])


def test_jacobi_grows_2_to_4_and_shrinks_to_2_with_slurm_following(
        testbed: Testbed, site: SiteConfig, jobs: list[MpiJob]) -> None:
    job = new_job(site, "jacobi", RESIZED, jobs)
    job.submit(2)
    job.wait_started(120)
    assert scontrol(testbed, job.slurm_id or 0)[1] == 2
    wait_progress(job, 15)
    grow = job.resize_to(4)
    assert (grow.after, grow.error) == (4, ""), grow
    assert scontrol(testbed, job.slurm_id or 0)[1] == 4  # the allocation follows
    wait_for(lambda: (job.progress() or {}).get("size") == 4, 60, "4 processes at work")
    wait_progress(job, 35)
    assert job.exit_code() is None, "the program ended before the shrink could be offered"
    shrink = job.resize_to(2)
    assert (shrink.after, shrink.error) == (2, ""), shrink
    wait_for(lambda: scontrol(testbed, job.slurm_id or 0)[1] == 2, 30,
             "Slurm to show the job on 2 nodes")
    assert job.wait_finished(300) == 0
    assert mpirun_rc(job) == "0"  # no crash of mpirun's teardown after the spawns
    malleable = job.result() or {}
    assert [p["size"] for p in malleable["phases"]] == [2, 4, 2]
    fixed = new_job(site, "jacobi", undelayed(RESIZED), jobs)
    began = time.monotonic()
    run = run_schedule(fixed, [2], RESIZED_ITERATIONS, 300)
    print(f"\nthe fixed reference run took {time.monotonic() - began:.1f} s")
    assert run.exit_code == 0 and [p["size"] for p in run.phases] == [2]
    assert mpirun_rc(fixed) == "0"
    assert math.isclose(malleable["checksum"], run.checksum or 0.0, rel_tol=1e-12)


#: The fft run's ``--delay-file`` (the site's shared /home): absent while its offer is out,
#: so each iteration sleeps ``FFT_OFFER_DELAY`` s, and ``0`` once the grow is checked. With
#: 40 iterations of 0.15 s, the 35 after the 5th gave a grow 5.3 s to reach the program; at
#: load ~20 the grow took 13.2 s and the job had ended ("ended before answering offer 1").
#: Measured with this test at load 11-24: grows of 22.3 and 18.8 s. FFT_ITERATIONS - 5
#: iterations of 1 s leave 75 s, 3.4x the longest; once grown the rest runs without delay.
FFT_DELAY_FILE = "fft-offer.delay"
FFT_OFFER_DELAY = "1.0"
FFT_ITERATIONS = 80


def test_fft_offered_5_takes_4_and_the_fifth_node_returns(
        testbed: Testbed, site: SiteConfig, jobs: list[MpiJob]) -> None:
    user = site.ssh.user if site.ssh is not None else "malleable"
    delay_file = f"/home/{user}/{FFT_DELAY_FILE}"
    testbed.exec(SITE, ["rm", "-f", delay_file], user=user, timeout=40, check=True)
    try:
        job = new_job(site, "fft", ("--iterations", str(FFT_ITERATIONS), "--size", "32", "--delay",
                                    FFT_OFFER_DELAY, "--delay-file", delay_file, "--max", "6"),
                      jobs)
        job.submit(2)
        job.wait_started(120)
        wait_progress(job, 5)
        change = job.grow(3)  # offered 5 nodes in total
        at = int((job.progress() or {}).get("iteration", 0))
        room = (FFT_ITERATIONS - 5) * float(FFT_OFFER_DELAY)
        print(f"\nfft offered 5: {change}; the grow took {change.seconds:.1f} s of the "
              f"{room:.0f} s the job left it; at iteration {at} of {FFT_ITERATIONS}")
        assert (change.before, change.after, change.error) == (2, 4, ""), (change, job.describe())
        assert scontrol(testbed, job.slurm_id or 0)[1] == 4
        assert idle(testbed) == 2  # the fifth node went back to the cluster
        testbed.exec(SITE, ["sh", "-c", 'echo 0 > "$1"', "sh", delay_file], user=user,
                     timeout=40, check=True)
        assert job.wait_finished(300) == 0
        assert [p["size"] for p in (job.result() or {})["phases"]] == [2, 4]
    finally:
        testbed.exec(SITE, ["rm", "-f", delay_file], user=user, timeout=40)


def test_cancel_in_the_middle_of_a_reconfiguration_leaves_nothing(
        testbed: Testbed, site: SiteConfig, jobs: list[MpiJob]) -> None:
    # long enough (>= 400 s of work) to still be running whenever the test gets to cancel it,
    # even on a slow machine; the cancel comes after a few iterations anyway
    job = new_job(site, "jacobi", ("--iterations", "2000", "--size", "96", "--delay", "0.2",
                                   "--max", "6"), jobs)
    job.submit(2)
    job.wait_started(120)
    wait_progress(job, 3)
    grower = threading.Thread(target=job.grow, args=(2,), daemon=True)
    grower.start()
    # the moment the program has taken the offer, it is spawning onto the new nodes
    wait_for(lambda: job.shell.read(job.batch, f"{job.run_dir}/ch/answer-1.json") is not None,
             120, "the program to accept the offer")
    other = ctl_for(site)  # a second connection: the grower holds the first
    try:
        other.cancel(job.slurm_id or 0)
    finally:
        other.runner.close()
    grower.join(120)
    wait_for(lambda: not stray_processes(testbed, job.run_dir), 60, "no stray processes")
    wait_for(lambda: idle(testbed) == 6, 60, "no leaked nodes")
    queue = testbed.exec(SITE, ["squeue", "-h", "-o", "%i %j %T"], check=True).stdout
    assert queue.strip() == ""  # neither the job nor a helper allocation


def test_app_demo_command_prints_phases_and_the_checksum(
        config_file: Path, jobs: list[MpiJob], capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["app", "demo", "cg", "--config", str(config_file), "--site", SITE,
                 "--schedule", "2,3,1", "--fixed", "2", "--iterations", "45", "--size", "64",
                 "--delay", "0.2"])
    out, err = capsys.readouterr()
    assert code == 0, out + err
    assert "malleable vs fixed: same checksum" in out
    assert out.count("checksum:") == 2
    assert "Slurm nodes" in out


def test_demo_rejects_a_schedule_larger_than_the_site(config_file: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["app", "demo", "jacobi", "--config", str(config_file), "--site", SITE,
                 "--schedule", "2,9"])
    assert code == 2
    assert "has 6 nodes; the schedule needs 9" in capsys.readouterr().err


# ----------------------------------------------------------------- the manager and DMR


#: Jacobi asking, at iteration 40 of its choosing, to grow to 4 processes.
ASKING = ("--iterations", "160", "--size", "96", "--delay", "0.15", "--max", "6")
ASK_AT, ASK_FOR = 40, 4
#: Its ``--delay-file`` (the site's shared /home): 0 once it is seen at work on 4 processes,
#: the last thing checked before its end, so the iterations left run without their delay.
ASKS_DELAY_FILE = "/home/malleable/jacobi-asks.delay"


def programs(spec: JobSpec) -> Launch | None:
    name, text = example_source("jacobi")
    if spec.app == "mpi:jacobi":
        return Launch(name, text, ("--iterations", "3000", "--size", "64", "--delay", "0.1",
                                   "--min", "1", "--max", "6", "--preferred", "2"))
    if spec.app == "mpi:jacobi-asks":
        return Launch(name, text, (*ASKING, "--request", f"{ASK_AT}:{ASK_FOR}",
                                   "--delay-file", ASKS_DELAY_FILE))
    return None


@pytest.fixture
def mpi_site(config_file: Path) -> Iterator[MpiSite]:
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
                what: str, testbed: Testbed | None = None) -> None:
    """Run manager cycles until ``done()``; on timeout say where things stand: the longest
    cycle, each site's health, the operations, each MPI job's state and the queue (CI once
    saw a shrink here stall for good after an SSH stall, with nothing else to go on)."""
    deadline = time.monotonic() + timeout
    longest = 0.0
    while time.monotonic() < deadline:
        began = time.monotonic()
        manager.cycle(clock.now())
        longest = max(longest, time.monotonic() - began)
        if done():  # type: ignore[operator]
            return
        time.sleep(1.0)
    said = [f"longest cycle {longest:.1f} s",
            *(f"site {name}: {health.summary()}" for name, health in manager.health.items()),
            f"operations: {[(op.kind, op.job_id, op.amount) for op in manager.operations]}"]
    for site in manager.clusters.values():
        for job_id, job in getattr(site, "jobs", {}).items():
            said.append(f"{job_id}: {job.describe()}; events {job.events()[-5:]}")
    if testbed is not None:
        said.append(site_state(testbed, SITE))
    pytest.fail(f"timed out after {timeout:g} s waiting for {what}\n" + "\n".join(said))


def test_dmr_grows_on_free_nodes_and_shrinks_toward_preferred_for_a_waiting_job(
        testbed: Testbed, mpi_site: MpiSite) -> None:
    site = mpi_site
    clock = site.cluster.clock
    assert isinstance(clock, ScaledClock)
    manager = Manager(DmrPolicy(), {SITE: site})
    a = JobSpec("a", JobKind.MALLEABLE, 1, 6, 2, app="mpi:jacobi", preferred_size=2)
    manager.submit(a)
    cycle_until(manager, clock, lambda: site.cluster.slurm_id("a") is not None
                and slurm_nodes(testbed, site.cluster.slurm_id("a"))[1] == 6, 240,
                "the DMR rule to expand job a onto the 4 free nodes", testbed)
    job = site.jobs["a"]
    assert job.size == 6
    wait_for(lambda: (job.progress() or {}).get("size") == 6, 60, "6 processes at work")
    b = JobSpec("b", JobKind.RIGID, 3, 3, 3, app="fixed", runtime=120.0)
    manager.submit(b)
    cycle_until(manager, clock, lambda: site.cluster.slurm_id("b") is not None
                and slurm_nodes(testbed, site.cluster.slurm_id("b"))[0] == "RUNNING", 240,
                "the waiting job to start after job a shrank", testbed)
    assert slurm_nodes(testbed, site.cluster.slurm_id("a")) == ("RUNNING", 3)
    assert job.size == 3  # 3 processes on the 3 nodes it kept
    wait_for(lambda: (job.progress() or {}).get("size") == 3, 60, "3 processes at work")
    wait_for(lambda: (job.progress() or {}).get("size") == 3, 60, "3 processes at work")
    ops = [(op.kind, op.job_id, op.amount) for op in manager.operations]
    assert ("grow", "a", 4) in ops and ("shrink", "a", 3) in ops and ("place", "b", 3) in ops


def test_an_application_request_to_grow_is_granted_from_free_nodes_under_fcfs(
        testbed: Testbed, site: SiteConfig, jobs: list[MpiJob], mpi_site: MpiSite) -> None:
    """FCFS never grows a job: the grow 2 -> 4 is the application's own request, granted."""
    clock = mpi_site.cluster.clock
    assert isinstance(clock, ScaledClock)
    manager = Manager(FCFS(), {SITE: mpi_site})
    testbed.exec(SITE, ["rm", "-f", ASKS_DELAY_FILE], user="malleable", timeout=40, check=True)
    manager.submit(JobSpec("a", JobKind.MALLEABLE, 1, 6, 2, app="mpi:jacobi-asks"))
    cycle_until(manager, clock, lambda: "a" in mpi_site.jobs and mpi_site.jobs["a"].nodes,
                240, "job a to start", testbed)
    job = mpi_site.jobs["a"]
    slurm_id = mpi_site.cluster.slurm_id("a")
    quiet = 0  # cycles seen before the program asked: FCFS leaves the 4 free nodes alone
    while quiet < 3:
        manager.cycle(clock.now())
        if int((job.progress() or {}).get("iteration", 0)) >= ASK_AT:
            break
        assert slurm_nodes(testbed, slurm_id) == ("RUNNING", 2) and idle(testbed) == 4
        assert [op.kind for op in manager.operations] == ["place"]
        quiet += 1
    assert quiet >= 1, "the program asked before the manager could look once"
    cycle_until(manager, clock, lambda: job.size == ASK_FOR, 240,
                "the manager to grant the program's request", testbed)
    asked = job.shell.read_json(job.batch, f"{job.run_dir}/ch/request-1.json") or {}
    assert (asked.get("target"), asked.get("iteration")) == (ASK_FOR, ASK_AT)
    assert slurm_nodes(testbed, slurm_id) == ("RUNNING", ASK_FOR)  # the allocation followed
    wait_for(lambda: (job.progress() or {}).get("size") == ASK_FOR, 60, "4 processes at work")
    assert "a" not in mpi_site.requested  # granted: the request is over
    ops = [(op.kind, op.job_id, op.amount) for op in manager.operations]
    assert ops == [("place", "a", 2), ("grow", "a", 2)]
    at = (job.progress() or {}).get("iteration")
    testbed.exec(SITE, ["sh", "-c", 'echo 0 > "$1"', "sh", ASKS_DELAY_FILE], user="malleable",
                 timeout=40, check=True)
    zeroed = time.monotonic()
    assert job.wait_finished(300) == 0
    print(f"\nthe grown run ended {time.monotonic() - zeroed:.1f} s after its delay was "
          f"set to 0 (near iteration {at} of 160)")
    testbed.exec(SITE, ["rm", "-f", ASKS_DELAY_FILE], user="malleable", timeout=40)
    resized = [e for e in job.events() if e["event"] == "resize"]
    assert [(e["previous"], e["size"]) for e in resized] == [(2, ASK_FOR)]
    assert resized[0]["iteration"] >= ASK_AT  # after the request, not before
    assert mpirun_rc(job) == "0"
    malleable = job.result() or {}
    assert [p["size"] for p in malleable["phases"]] == [2, ASK_FOR]
    fixed = new_job(site, "jacobi", undelayed(ASKING), jobs)
    began = time.monotonic()
    run = run_schedule(fixed, [2], 160, 300)
    print(f"\nthe fixed reference run took {time.monotonic() - began:.1f} s")
    assert run.exit_code == 0 and [p["size"] for p in run.phases] == [2]
    assert math.isclose(malleable["checksum"], run.checksum or 0.0, rel_tol=1e-12)
