"""CooRM's real views over OAR: availability from recorded ``oarstat -J`` output, and a
CooRM core whose starts are OAR jobs on a fake OAR site (tests/fakes/oar.py)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from malleable.adapters.oar.cluster import OarCluster
from malleable.adapters.oar.ctl import OarCtl, Poll
from malleable.adapters.oar.parse import OarJob, OarNode, parse_oarnodes, parse_oarstat
from malleable.clock import ScaledClock
from malleable.config import parse_config
from malleable.coorm.core import CoreConfig
from malleable.coorm.oar_views import OarWalltimePayload, busy_from_oar_poll
from malleable.coorm.policy import Busy
from malleable.coorm.protocol import Done, KillNotify, Request, StartNotify, Subscribe
from malleable.coorm.real import RealCapSource, RealCoorm, real_sites
from malleable.model import JobKind, JobSpec
from tests.fakes.oar import FakeOar

DATA = Path(__file__).parents[1] / "data" / "oar"


def _recorded() -> Poll:
    """Two running 1-node jobs with W=0:5:0 (started 1795478262 and ...251), one waiting."""
    return Poll(tuple(parse_oarstat((DATA / "oarstat-running-waiting.json").read_text())),
                tuple(parse_oarnodes((DATA / "oarnodes-busy.json").read_text())))


def test_the_short_listing_gives_the_walltime_through_the_message() -> None:
    jobs = {j.job_id: j for j in _recorded().jobs}
    assert {i: j.walltime for i, j in jobs.items()} == {2: 300.0, 3: 300.0, 4: 300.0}
    full = parse_oarstat((DATA / "oarstat-full-terminated.json").read_text())
    assert full[0].walltime == 300.0  # the full listing's own field


@pytest.mark.parametrize(("message", "seconds"), [
    ("R=2,W=1:30:5,J=B (Karma=0.000,quota_ok)", 5405.0),
    ("R=1,W=0:0:0,J=B", None), ("", None), ("Karma W=1:0:0", None)])
def test_walltime_from_the_message(message: str, seconds: float | None) -> None:
    doc = {"7": {"Job_Id": 7, "state": "Running", "message": message}}
    assert parse_oarstat(json.dumps(doc))[0].walltime == seconds


def test_recorded_jobs_hold_their_nodes_until_start_plus_walltime() -> None:
    offset = 1795478262.0 - 10.0  # service time 10 s is the newer job's start
    busy = busy_from_oar_poll("grid", _recorded(), 20.0, offset)
    assert busy == [Busy("grid", 1, 10.0 - 11.0 + 300.0), Busy("grid", 1, 10.0 + 300.0)]
    # the waiting job (4) takes nothing: CooRM plans ahead of OAR's queue


def test_managed_jobs_and_nodes_out_of_service_are_left_out() -> None:
    poll = _recorded()
    assert busy_from_oar_poll("grid", poll, 0.0, 1795478000.0, managed={2, 3}) == []
    suspected = Poll(poll.jobs, tuple(OarNode(n.resource_id, n.address, "Suspected")
                                      if n.address == "oar-n001" else n for n in poll.nodes))
    busy = busy_from_oar_poll("grid", suspected, 0.0, 1795478000.0)
    assert [b.hosts for b in busy] == [1]  # job 3's node is Suspected: not a host at all


def _running(job_id: int, start: float | None, walltime: float | None) -> OarJob:
    return OarJob(job_id, "bg", "alice", "Running", ("n1", "n2"), 1.0, start, None,
                  walltime=walltime)


def test_overrun_unknown_walltime_and_no_start_yet() -> None:
    nodes = (OarNode(1, "n1", "Alive"), OarNode(2, "n2", "Alive"))
    now, offset = 100.0, 1000.0
    assert busy_from_oar_poll("g", Poll((_running(1, 1050.0, 30.0),), nodes), now,
                              offset) == [Busy("g", 2, now + 60.0)]  # past: gone within 60 s
    assert busy_from_oar_poll("g", Poll((_running(1, 1050.0, None),), nodes), now,
                              offset) == [Busy("g", 2, math.inf)]
    assert busy_from_oar_poll("g", Poll((_running(1, None, 50.0),), nodes), now,
                              offset) == [Busy("g", 2, now + 50.0)]


def test_walltime_payload_rounds_the_duration_up_to_minutes() -> None:
    spec = JobSpec("a", JobKind.RIGID, 2, 2, 2, app="fixed", runtime=61.0, walltime=61.0)
    assert OarWalltimePayload().walltime(spec) == "0:02:00"
    long = JobSpec("b", JobKind.RIGID, 2, 2, 2, app="fixed", runtime=3600.0, walltime=3601.0)
    assert OarWalltimePayload().walltime(long) == "1:01:00"


def test_real_sites_builds_an_oar_adapter_for_an_oar_site() -> None:
    config = parse_config({"clusters": {"vu": {"kind": "slurm"},
                                        "leiden": {"kind": "oar", "reserve": 1}}})
    sites = real_sites(config, "t1")
    assert isinstance(sites["leiden"], OarCluster) and sites["leiden"].reserve == 1
    assert isinstance(sites["leiden"].payload, OarWalltimePayload)
    assert type(sites["vu"]).__name__ == "SlurmCluster"


def _core(fake: FakeOar) -> RealCoorm:
    clock = ScaledClock(float(fake.now), 1.0)
    site = OarCluster("grid", OarCtl(fake), clock, "t1", OarWalltimePayload())
    epoch = iter(float(fake.now) + k for k in range(1000))
    return RealCoorm(RealCapSource({"grid": site}, epoch=lambda: next(epoch)),
                     CoreConfig(0.0, 0.0, 1.0))


def test_a_start_becomes_an_oar_job_and_done_deletes_it() -> None:
    fake = FakeOar([f"grid-n{k}" for k in range(1, 5)])
    fake.add_job(3, walltime=600)  # a local user's job: 3 of 4 nodes for 10 minutes
    core = _core(fake)
    assert [(c.cid, c.hosts) for c in core.platform.clusters] == [("grid", 4)]
    app = core.subscribe(Subscribe(name="x"), 0.0)
    core.advance(0.0)
    assert core.source.busy(1.0) == [Busy("grid", 3, 600.0)]  # fake clock: epoch 0 = now
    core.handle(app, Request(hosts={"grid": 1}, duration=90.0), 1.0)
    starts = [m for _, m in core.advance(2.0) if isinstance(m, StartNotify)]
    assert len(starts) == 1 and len(starts[0].rids["grid"]) == 1
    (sub,) = core.submissions
    assert starts[0].jobs == {"grid": sub.native_id} and sub.nodes == 1
    oarsub = [c for c in fake.calls if c[:2] == ["oarsub", "-J"]]
    assert oarsub and "nodes=1,walltime=0:02:00" in oarsub[-1]
    assert fake.jobs[sub.native_id].state == "Running"
    assert core.source.busy(3.0) == [Busy("grid", 3, 600.0)]  # its own job is left out
    core.handle(app, Done(), 5.0)
    core.advance(5.0)
    assert fake.jobs[sub.native_id].state == "Error"  # oardel'd (FRAG_JOB_REQUEST)


def test_a_refused_oar_submission_is_a_kill() -> None:
    fake = FakeOar([f"grid-n{k}" for k in range(1, 3)])
    core = _core(fake)
    fake.node_names.pop()  # the site lost a node after CooRM observed it: 2 hosts, 1 real
    app = core.subscribe(Subscribe(name="x"), 0.0)
    core.advance(0.0)
    core.handle(app, Request(hosts={"grid": 2}, duration=60.0), 0.5)
    out = core.advance(1.0)
    kills = [m for a, m in out if a == app and isinstance(m, KillNotify)]
    assert kills and "grid" in kills[0].reason and core.submissions == []


def test_close_deletes_every_held_oar_job() -> None:
    fake = FakeOar([f"grid-n{k}" for k in range(1, 3)])
    core = _core(fake)
    app = core.subscribe(Subscribe(name="x"), 0.0)
    core.advance(0.0)
    core.handle(app, Request(hosts={"grid": 2}, duration=60.0), 0.5)
    core.advance(1.0)
    (sub,) = core.submissions
    core.close()
    assert fake.jobs[sub.native_id].state == "Error"
