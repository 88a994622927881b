"""A compute container killed (``docker kill``) under a running managed job.

One malleable job of 4 nodes runs through ``malleable manager run`` on one of the two
sites (both are configured: a single slow site would count as "no site answered"); once
it runs, the container holding two of its nodes but not its batch host is killed. Slurm marks
those nodes not responding (about 40-60 s here, well before ``SlurmdTimeout`` = 120 s
would end the job ``NODE_FAIL``); the adapter sheds them (``scontrol update
NodeList=``) and the job completes on the nodes it kept. The run reports the node
failure in ``summary.json``, nothing is failed or retried, no helper is left, and the
container is started again afterwards whatever happened.

Once the job is seen on fewer nodes (the shed), nothing is left to check until it ends, so the
test then creates the sites' ``finish_file`` (docs/slurm.md): the job's payload ends its
remaining work at its next tick and exits 0, and the job completes in Slurm and in the run as
before, without the rest of its 120 s.
"""

from __future__ import annotations

import contextlib
import json
import re
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from malleable.adapters.slurm import hostlist, meta
from malleable.cli import main
from malleable.model import JobKind, JobSpec
from malleable.testbed import Testbed
from malleable.workloads.swf import write_swf
from tests.fakes.waits import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

#: Real seconds (time scale 1): the job must outlive the detection of the kill and the
#: shed. Slurm pings every SlurmdTimeout/3 = 40 s with MessageTimeout = 30 s, so a killed
#: node is flagged NOT_RESPONDING 40-70 s after the kill (46 s and 57 s measured); the
#: seconds from the kill to the shed are printed to watch the margin.
RUNTIME = 120.0

#: Every site's ``finish_file`` (on its shared /home): written once the shed is seen, it
#: ends the job's payload at its next tick (exit 0), so the job completes without the rest
#: of RUNTIME, which no check needs.
FINISH_FILE = "/home/malleable/node-failure.finish"


SITES = ("vu", "uva")


def _squeue(tb: Testbed) -> list[list[str]]:
    rows = []
    for site in SITES:
        out = tb.exec(site, ["squeue", "--noheader", "--format=%i|%T|%N|%B|%k"], timeout=40,
                      check=True).stdout
        rows += [line.split("|", 4) for line in out.splitlines() if line.strip()]
    return rows


def _nodes_ok(tb: Testbed) -> bool:
    states = []
    for site in SITES:
        out = tb.exec(site, ["sinfo", "--noheader", "--Node", "--format=%N %t"],
                      timeout=40).stdout
        states += [line.split()[1] for line in out.splitlines() if line.strip()]
    return len(states) == 8 and all(s == "idle" for s in states)


def _remove_finish_file(tb: Testbed) -> None:
    for site in SITES:
        tb.exec(site, ["rm", "-f", FINISH_FILE], user="malleable", timeout=40, check=True)


@pytest.fixture
def quiet(small_testbed: Testbed) -> Iterator[Testbed]:
    wait_for(lambda: not _squeue(small_testbed) and _nodes_ok(small_testbed), 120,
             "both sites idle before the run")
    _remove_finish_file(small_testbed)
    yield small_testbed
    for container in small_testbed.containers():  # whatever happened: all running again
        if not container.running:
            small_testbed.docker.docker_cmd("start", container.id)
    for site in SITES:
        small_testbed.exec(site, ["scancel", "--user=malleable"])
    wait_for(lambda: not _squeue(small_testbed) and _nodes_ok(small_testbed), 180,
             "every node back and idle after the run")
    _remove_finish_file(small_testbed)


def _managed_nodes(tb: Testbed) -> tuple[list[str], str] | None:
    """The running managed job's nodes and batch host, if it runs."""
    for _, state, nodes, batch, comment in _squeue(tb):
        if state == "RUNNING" and meta.decode(comment) is not None:
            return hostlist.expand(nodes), batch
    return None


def _note_the_shed(tb: Testbed, killed_at: float, killed: dict[str, str], batch: str,
                   stop: threading.Event) -> None:
    """Note the seconds from the kill to the job on fewer nodes (only printed: a failed
    squeue ends the watch, never the test); once it is shed, create the finish file (from
    the job's batch host: the site's /home)."""
    with contextlib.suppress(Exception):
        while not stop.wait(1.0):
            job = _managed_nodes(tb)
            if job is None or len(job[0]) < 4:
                what = "ended" if job is None else "shed"
                killed[f"{what}_after_s"] = f"{time.monotonic() - killed_at:.0f}"
                if job is not None:  # Slurm's own node list of the job: what it kept
                    killed["kept"] = ",".join(job[0])
                    tb.exec(batch, ["touch", FINISH_FILE], user="malleable", timeout=40,
                            check=True)
                    killed["finish_after_s"] = f"{time.monotonic() - killed_at:.0f}"
                return


def _kill_under_the_job(tb: Testbed, killed: dict[str, str], stop: threading.Event) -> None:
    """Once the managed job runs on 4 nodes, kill a container without its batch host; then
    note how long the job took to run on fewer nodes (the shed), for the printed margin."""
    while not stop.is_set():
        job = _managed_nodes(tb)
        if job is not None and len(job[0]) == 4:
            names, batch = job
            victim = next(n for n in reversed(names) if
                          tb.container(n).hostname != tb.container(batch).hostname)
            container = tb.container(victim)
            tb.docker.docker_cmd("kill", container.id)
            at = time.monotonic()
            killed.update(container=container.hostname, ran=",".join(names), nodes=",".join(
                n for n in names if tb.container(n).hostname == container.hostname))
            _note_the_shed(tb, at, killed, batch, stop)
            return
        time.sleep(1.0)


def test_a_killed_compute_container_is_shed_and_the_job_completes(quiet: Testbed,
                                                                   tmp_path: Path) -> None:
    config = tmp_path / "clusters.toml"
    config.write_text(re.sub(r"^(\[clusters\.[^\]]+\])$", rf'\1\nfinish_file = "{FINISH_FILE}"',
                             quiet.config_toml(), flags=re.MULTILINE))
    assert config.read_text().count(f'finish_file = "{FINISH_FILE}"') == len(SITES)
    workload = tmp_path / "one.swf"
    write_swf(workload, [JobSpec("1", JobKind.MALLEABLE, 1, 4, 4, submit_time=0.0,
                                 app="fixed", runtime=RUNTIME)])
    out = tmp_path / "out"
    killed: dict[str, str] = {}
    stop = threading.Event()
    killer = threading.Thread(target=_kill_under_the_job, args=(quiet, killed, stop), daemon=True)
    killer.start()
    began = time.monotonic()
    try:
        rc = main(["manager", "run", "--config", str(config), "--policy",
                   "fpsma", "--approach", "pra", "--workload", str(workload),
                   "--time-scale", "1", "--poll", "2", "--deadline", "400", "--out", str(out),
                   "--json"])
    finally:
        stop.set()
        killer.join(timeout=60)
    seconds = time.monotonic() - began
    summary = json.loads((out / "summary.json").read_text())
    print(f"\nnode failure: rc {rc} in {seconds:.0f} s, killed {killed}, "
          f"node_failures {summary['node_failures']}, retries {summary['retries']}")
    assert killed, "the job never ran on 4 nodes: nothing was killed"
    assert rc == 0 and summary["stopped"] == "done" and summary["completed"] == 1
    assert summary["failed_jobs"] == {} and summary["retries"] == {}
    (failure,) = summary["node_failures"]
    assert failure["site"] == killed["container"].split("-")[0]
    assert failure["action"] == "shed"
    assert failure["outcome"] == "done" and failure["after"] == 2
    assert sorted(str(failure["dead"]).split(",")) == sorted(killed["nodes"].split(","))
    if "kept" in killed:  # seen shed (then the job was let finish): Slurm dropped the dead
        dead = set(killed["nodes"].split(","))
        assert killed["kept"].split(",") == [n for n in killed["ran"].split(",") if n not in dead]
    helpers = [row for row in _squeue(quiet) if (tag := meta.decode(row[4])) is not None
               and tag.helper_for is not None]
    assert helpers == []
