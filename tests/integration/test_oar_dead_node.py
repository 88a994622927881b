"""A compute container of an OAR site killed (``docker kill``) under a running managed job.

OAR 2.5.9 does not end a job whose node died: its nodes turn Suspected once finaud checks
them (the testbed sets ``CHECK_NODES_WITH_RUNNING_JOB="yes"``), and the job stays Running.
The adapter then deletes an extension job on a dead node and counts the job one node
smaller, and fails a job whose base job's node died, as retriable (the manager runs it
again). One OarCluster drives a job of 5 nodes (base job of 1 node + 4 extensions) on a
site of 6 nodes in 3 containers; first a container without the base job's node is killed,
then the base job's. Bounded by the test timeout; the module's testbed is taken down after.
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from malleable.adapters.oar.cluster import OarCluster
from malleable.adapters.oar.payload import OarPayload
from malleable.adapters.oar.sites import oar_ctl_for
from malleable.clock import ScaledClock
from malleable.config import load_config
from malleable.model import JobKind, JobSpec, JobState
from malleable.resources import JobEvent
from malleable.testbed import Docker, Site, Testbed, Topology
from tests.fakes.waits import own_testbed, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

GRID = Site("grid", 6, containers=3, kind="oar")


@pytest.fixture(scope="module")
def oar6(docker_engine: Docker, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Testbed]:
    yield from own_testbed("oardead", Topology("oar-dead", (GRID,)),
                           tmp_path_factory.mktemp("oar-dead"), docker_engine)


def _oar(tb: Testbed) -> tuple[dict[int, dict[str, object]], dict[str, str]]:
    jobs = json.loads(tb.exec("grid", ["oarstat", "-fJ"], check=True).stdout or "{}")
    nodes = json.loads(tb.exec("grid", ["oarnodes", "-J"], check=True).stdout or "{}")
    return ({int(k): v for k, v in jobs.items()},
            {str(v["network_address"]): str(v["state"]) for v in nodes.values()})


def _container_of(node: str) -> str:
    return next(host for host, names in GRID.layout().items() if node in names)


def test_dead_nodes_under_a_job_shed_its_extensions_then_fail_it_retriable(
        oar6: Testbed, tmp_path: Path) -> None:
    config = tmp_path / "clusters.toml"
    config.write_text(oar6.config_toml())
    site = load_config(config).site("grid")
    oar = OarCluster("grid", oar_ctl_for(site), ScaledClock(time.time(), 1.0),
                     f"dn{secrets.token_hex(3)}", OarPayload(time_scale=1.0))
    events: list[JobEvent] = []

    def seen(state: JobState, size: int | None = None) -> bool:
        oar.refresh()
        events.extend(oar.drain_events())
        return any(e.state is state and (size is None or e.size == size) for e in events)

    try:
        assert oar.start(JobSpec("a", JobKind.MALLEABLE, 1, 5, 5, app="fixed",
                                 runtime=3600.0), 5) == 5
        wait_for(lambda: seen(JobState.RUNNING, 5), 120, "a running at 5 nodes")
        base = oar.native_id("a")
        jobs, _ = _oar(oar6)
        base_node = jobs[base]["assigned_network_address"][0]  # type: ignore[index]
        held = {str(n): j for j, doc in jobs.items()
                for n in doc["assigned_network_address"]}  # type: ignore[attr-defined]
        victim = next(c for c in GRID.layout() if c != _container_of(base_node)
                      and any(_container_of(n) == c for n in held))
        dead = sorted(n for n in GRID.layout()[victim] if n in held)
        t0 = time.monotonic()
        oar6.docker.docker_cmd("kill", oar6.container(victim).id)

        wait_for(lambda: seen(JobState.RUNNING, 5 - len(dead)), 240,
                 f"a shed {dead} (killed {victim})", interval=2.0,
                 explain=lambda: str(_oar(oar6)))
        shed_after = time.monotonic() - t0
        assert oar.node_failures == [{"job": "a", "oar_ids": sorted(held[n] for n in dead),
                                      "dead": ",".join(dead), "action": "shed"}]
        jobs, states = _oar(oar6)
        assert {states[n] for n in dead} == {"Suspected"}
        assert all("FRAG_JOB_REQUEST" in [e["type"] for e in jobs[held[n]]["events"]]  # type: ignore[index]
                   for n in dead)  # deleted; OAR cannot reach them yet
        assert jobs[base]["state"] == "Running"
        assert oar.observe().running["a"].size == 5 - len(dead)
        assert not any(e.state.finished for e in events)

        t1 = time.monotonic()
        oar6.docker.docker_cmd("kill", oar6.container(_container_of(base_node)).id)
        wait_for(lambda: seen(JobState.FAILED), 240, "a failed with its base job's node",
                 interval=2.0, explain=lambda: str(_oar(oar6)))
        failed = next(e for e in events if e.state is JobState.FAILED)
        assert failed.retriable, failed
        assert failed.reason.startswith("OAR node ") and f"under its base job {base}" in \
            failed.reason
        assert [f["action"] for f in oar.node_failures] == ["shed", "failed"]
        print(f"shed {dead} {shed_after:.0f} s after the kill; failed "
              f"{time.monotonic() - t1:.0f} s after the second kill")
    finally:
        oar.close()
        for container in oar6.containers():
            if not container.running:
                oar6.docker.docker_cmd("start", container.id)
