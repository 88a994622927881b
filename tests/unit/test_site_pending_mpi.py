"""The site service answers an MPI job's grow "pending": the program's answer (up to
minutes over its channel) is awaited in a worker while the service keeps cycling.

The negotiation over the channel is stood in for by a gated ``_mpi_change`` that resizes
the job in the fake Slurm once opened (the channel itself is tested in
test_site_channel.py); everything else is the service as ``manager serve`` builds it.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from malleable.adapters.shell import Result
from malleable.adapters.slurm.ctl import SlurmCtl
from malleable.config import SiteConfig
from malleable.realtime import Outcome
from malleable.site import tag as tags
from malleable.site.adapter import SiteSlurm
from malleable.site.assembly import open_service
from malleable.site.config import parse_service_config
from malleable.site.daemon import SiteService
from malleable.site.driver import ServiceDriver, driver_for
from tests.fakes.slurm import FakeSlurm, node_names

ACCOUNT = "malleable"


class Locked:
    """A fake Slurm site that runs one command at a time (the worker and the polls share it)."""

    def __init__(self, fake: FakeSlurm) -> None:
        self.fake, self.lock = fake, threading.Lock()

    def run(self, argv: Sequence[str], timeout: float, *, input: str | None = None,
            check: bool = True) -> Result:
        with self.lock:
            return self.fake.run(argv, timeout, input=input, check=check)

    def close(self) -> None:
        pass


def _open(tmp_path: Path, fakes: dict[str, Locked]) -> tuple[SiteService, ServiceDriver]:
    doc = {"service": {"state": str(tmp_path / "state.sqlite"), "poll": 1.0},
           "policy": {"name": "fpsma", "options": {"approach": "pra"}},
           "clusters": {name: {} for name in fakes}}
    config = parse_service_config(doc, str(tmp_path / "manager.toml"), tmp_path)

    def ctl(site: SiteConfig) -> SlurmCtl:
        return SlurmCtl(fakes[site.name], user=ACCOUNT)  # type: ignore[arg-type]

    service = open_service(config, ctl)
    for adapter in service.adapters.values():
        assert adapter.resizer is not None
        adapter.resizer.sleep = lambda s: None
        adapter.resizer.settle = 0.0
    return service, driver_for(service)


def _cycle(driver: ServiceDriver) -> float:
    began = time.monotonic()
    with ThreadPoolExecutor(max_workers=2) as pool:
        driver._cycle(pool, Outcome(0, "", 0))
    return time.monotonic() - began


@pytest.mark.parametrize("answer", ["taken", "declined"])
def test_an_mpi_answer_in_flight_holds_up_no_other_job_or_site(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, answer: str) -> None:
    fakes = {name: Locked(FakeSlurm(node_names(4), admin_levels={ACCOUNT: "Operator"}))
             for name in ("vu", "uva")}
    opened, asked = threading.Event(), threading.Event()

    def slow_change(self: SiteSlurm, job_id: str, delta: int,
                    mandatory: bool) -> tuple[int, str]:
        asked.set()
        assert opened.wait(10)
        size, slurm_id = self.size_of(job_id), self.cluster.slurm_id(job_id)
        assert size is not None
        if answer == "declined":
            return size, "the application declined the offer"
        assert self.resizer is not None and slurm_id is not None
        return self.resizer.resize(slurm_id, size + delta).after, ""

    monkeypatch.setattr(SiteSlurm, "_mpi_change", slow_change)
    vu, uva = fakes["vu"].fake, fakes["uva"].fake
    alice = vu.add_job(1, tags.encode(tags.UserTag(1, 4, mpi=True), "alice"), name="jacobi",
                       user="alice", held=True)
    service, driver = _open(tmp_path, fakes)
    _cycle(driver)  # alice placed on vu
    _cycle(driver)  # followed and offered vu's 3 idle nodes: answered PENDING
    assert asked.wait(5.0)
    manager = service.manager
    job = f"alice:vu.{alice.job_id}"
    assert manager.in_flight == {job: "grow"}
    assert service.adapters["vu"].observe().running[job].growing == 3

    with fakes["uva"].lock:
        bob = uva.add_job(1, tags.encode(tags.UserTag(1, 4), "bob"), name="app", user="bob",
                          held=True)
    seconds = [_cycle(driver) for _ in range(3)]  # bob placed and grown on uva meanwhile
    assert max(seconds) < 2.0, seconds
    assert bob.state == "RUNNING" and len(bob.nodes) == 4
    assert len(alice.nodes) == 1 and manager.in_flight  # alice still negotiating

    opened.set()
    negotiations = service.adapters["vu"].negotiations
    assert negotiations is not None and negotiations.wait(5.0) == []
    _cycle(driver)
    _cycle(driver)
    grows = [(op.job_id, op.amount) for op in manager.operations if op.kind == "grow"]
    if answer == "taken":
        assert len(alice.nodes) == 4
        assert (job, 3) in grows and grows.count((job, 3)) == 1
        assert manager.records[job].sizes[-1][1] == 4
    else:
        assert len(alice.nodes) == 1
        assert all(j != job for j, _ in grows)
        assert manager.records[job].sizes[-1][1] == 1
    service.close()
