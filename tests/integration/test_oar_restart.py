"""A manager restart on an OAR site: the adapter takes a job's extension jobs back from
the journal (SQLite), not by name from whatever OAR lists.

One OarCluster starts a malleable job at 3 nodes of an OAR testbed site (base job of 1
node + 2 extension jobs), releases one extension, and is dropped (the manager "dies").
A second OarCluster over the same journal adopts the job as ``store.resume`` would, and
must release the *live* extension with a mandatory shrink, before any poll; OAR then
runs the base job alone. Bounded by the test timeout; the module's testbed is taken down
after its last test, every OAR job deleted after each test.
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
from malleable.config import SiteConfig, load_config
from malleable.model import JobKind, JobSpec, JobState
from malleable.store import Store
from malleable.testbed import Docker, Site, Testbed, Topology
from tests.fakes.waits import own_testbed, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

OAR3 = Topology("oar-restart", (Site("grid", 3, containers=1, kind="oar"),))


def _states(tb: Testbed) -> dict[int, str]:
    out = tb.exec("grid", ["oarstat", "-J"], check=True).stdout
    return {int(k): str(v["state"]) for k, v in json.loads(out or "{}").items()}


@pytest.fixture(scope="module")
def oar3(docker_engine: Docker, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Testbed]:
    yield from own_testbed("oarrestart", OAR3, tmp_path_factory.mktemp("oar-restart"),
                           docker_engine)


@pytest.fixture
def grid(oar3: Testbed, tmp_path: Path) -> Iterator[SiteConfig]:
    config = tmp_path / "clusters.toml"
    config.write_text(oar3.config_toml())
    try:
        yield load_config(config).site("grid")
    finally:
        live = list(_states(oar3))
        if live:
            oar3.exec("grid", ["oardel", *map(str, live)], user="malleable")
        wait_for(lambda: not _states(oar3), 300, "the OAR queue empty after the test")


def _adapter(site: SiteConfig, store: Store, run: str) -> OarCluster:
    return OarCluster("grid", oar_ctl_for(site), ScaledClock(time.time(), 1.0), run,
                      OarPayload(time_scale=1.0), journal=store)


def test_a_restarted_adapter_takes_the_extensions_back_from_the_journal(
        oar3: Testbed, grid: SiteConfig, tmp_path: Path) -> None:
    store = Store.open(tmp_path / "state.sqlite")
    run = f"rs{secrets.token_hex(3)}"
    spec = JobSpec("a", JobKind.MALLEABLE, 1, 3, 3, app="fixed", runtime=3600.0)
    first = _adapter(grid, store, run)
    assert first.start(spec, 3) == 3
    wait_for(lambda: any(e.job_id == "a" and e.state is JobState.RUNNING
                         for e in first.drain_events()), 120, "a running at 3 nodes")
    assert first.observe().running["a"].size == 3
    base = first.native_id("a")
    live, released = store.extensions("grid", "a")
    assert base is not None and len(live) == 2 and released == []
    assert first.request_shrink("a", 1, True) == 1
    dying = live[-1]
    assert store.extensions("grid", "a") == (live[:1], [dying])
    first.close()  # the manager "dies"; OAR may still list the deleted extension a while

    second = _adapter(grid, store, run)
    second.adopt(spec, base, requested=3, started=True, size=2, since=second.clock.now())
    assert second.request_shrink("a", 1, True) == 1  # the live extension, before any poll
    wait_for(lambda: set(_states(oar3)) == {base}, 120,
             f"OAR running the base job {base} alone (extensions {live} deleted)")
    assert _states(oar3)[base] == "Running"
    wait_for(lambda: second.observe().running["a"].size == 1, 60, "the view at 1 node")
    second.cancel("a")
    wait_for(lambda: any(e.job_id == "a" and e.state.finished
                         for e in second.drain_events()), 120, "a cancelled")
    second.close()
    store.close()
