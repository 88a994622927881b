"""``malleable manager serve`` over the whole ``das3-mixed`` topology, scaled down (issue 15).

``das3-mixed`` at ``--scale 0.1``: Slurm sites vu (8 nodes), uva (4), delft (7), OAR sites
multimedian (5) and leiden (3), 16 containers. The service runs in vu's controller as
``malleable`` (never root), KOALA PWA + FPSMA, 2-s polls, the application channel open at
``vu-ctl:7461``; vu is reached locally, the four other sites over SSH. Users submit with
``malleable submit --config`` over SSH as themselves:

* alice's job on multimedian, range [1, 3], with ``--service``: her agent connects from
  her base job's node; the policy grows her job 1 -> 3 through it (two extension jobs of
  hers). Bob's rigid 3-node job on multimedian then makes PWA shrink hers 3 -> 2 (her agent
  releases one extension), bob's job runs and ends, and FPSMA grows hers back to 3. Her
  command records each size it reads (``1 3 2 3``) until she stops it;
* alice's two-site job (``--site vu,leiden``): placed on vu (more room), grown there to its
  maximum, and its held OAR copy on leiden deleted;
* bob's job for delft alone, range [2, 4]: placed and grown on delft;
* bob's job for leiden alone, rigid: resumed on leiden.

Every job completes (read on the sites too: sacct, oarstat -fJ) and nothing of alice's or
bob's is left in any queue. Prints the bring-up time and, per job, its site, sizes and end
state. Not run by default (a 16-container testbed, 4 to 5 minutes on the 2-core machine):
``MALLEABLE_DAS3_MIXED=1`` with ``--integration`` selects it.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from malleable.adapters.oar.parse import parse_oarstat
from malleable.cli import main
from malleable.model import JobState
from malleable.testbed import Docker, Testbed
from malleable.testbed.topology import DAS3_MIXED
from tests.fakes.accounts import user_config
from tests.fakes.serving import Serve, oar_jobs
from tests.fakes.waits import own_testbed, wait_for

pytestmark = [
    pytest.mark.integration, pytest.mark.timeout(1800),
    pytest.mark.skipif(os.environ.get("MALLEABLE_DAS3_MIXED", "") in ("", "0"),
                       reason="the das3-mixed service run: set MALLEABLE_DAS3_MIXED=1"),
]

SCALE = 0.1
TOPOLOGY = DAS3_MIXED.scaled(SCALE)
SLURM, OAR = ("vu", "uva", "delft"), ("multimedian", "leiden")
HOME = "/home/malleable/serve"
CHANNEL = "vu-ctl:7461"
CONFIG = """[service]
state = "/home/malleable/serve/state.sqlite"
poll = 2.0
metrics = ""
channel = "0.0.0.0:7461"

[policy]
name = "fpsma"
options = { approach = "pwa" }

[ssh]
user = "malleable"
key = "/home/malleable/.ssh/id_ed25519"
known_hosts = "/etc/ssh/ssh_known_hosts"

[clusters.vu]
partition = "batch"
""" + "".join(f'\n[clusters.{s}]\nhost = "{s}-ctl"\npartition = "batch"\n'
              for s in SLURM[1:]) + "".join(
    f'\n[clusters.{s}]\nkind = "oar"\nhost = "{s}-ctl"\ncommand_timeout = 120\n' for s in OAR)
#: Alice's command on multimedian: records each size it reads until she asks it to stop.
APP = ('last=; while [ ! -e "$HOME/dm-stop" ]; do n=$(cat "$MALLEABLE_RUN_DIR/size"); '
       'if [ "$n" != "$last" ]; then echo "$n" >> "$HOME/dm-sizes"; last=$n; fi; '
       'sleep 0.5; done')
BRINGUP: dict[str, float] = {}


class Watched(Serve):
    """The service, with every size of every job its status files showed, in order."""

    def __init__(self, tb: Testbed, site: str, home: str, config: str) -> None:
        self.sizes: dict[str, list[int]] = {}
        super().__init__(tb, site, home, config)

    def status(self) -> dict[str, Any]:
        found = super().status()
        for job in found.get("jobs", ()):
            seen = self.sizes.setdefault(str(job["id"]), [])
            if job["size"] and (not seen or seen[-1] != job["size"]):
                seen.append(int(job["size"]))
        return found


@pytest.fixture(scope="module")
def mixed(docker_engine: Docker, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Testbed]:
    began = time.monotonic()
    testbeds = own_testbed("dmserve", TOPOLOGY, tmp_path_factory.mktemp("das3-mixed"),
                           docker_engine, timeout=900.0)
    tb = next(testbeds)
    BRINGUP["up"] = time.monotonic() - began
    yield tb
    began = time.monotonic()
    next(testbeds, None)
    print(f"das3-mixed*{SCALE:g} down in {time.monotonic() - began:.1f} s")  # with -s


@pytest.fixture
def serve(mixed: Testbed) -> Iterator[Watched]:
    service = Watched(mixed, "vu", HOME, CONFIG)
    try:
        yield service
    finally:
        mixed.exec("multimedian", ["touch", "/home/alice/dm-stop"], user="alice")
        service.close()
        for site in SLURM:
            for user in ("alice", "bob"):
                mixed.exec(site, ["scancel", "-u", user], timeout=30)
        for site in OAR:
            live = list(oar_jobs(mixed, site))
            if live:
                mixed.exec(site, ["su", "oar", "-s", "/bin/sh", "-c",
                                  "oardel " + " ".join(map(str, live))])


def _submit(config: Path, capsys: pytest.CaptureFixture[str], sites: str, low: int,
            high: int, *command: str) -> str:
    """``malleable submit`` as the config's user: what it prints (the site's id of a
    one-site job, ``USER:SUB`` of a job with copies)."""
    code = main(["submit", "--config", str(config), "--site", sites, "--min", str(low),
                 "--max", str(high), "--time", "20", "--service", CHANNEL, "--", *command])
    out = capsys.readouterr().out.strip()
    assert code == 0 and out, out
    return out


def _service_id(serve: Serve, user: str, site: str, native: str) -> str:
    """The service's id of a user's one-site job, once adopted and placed."""
    def found() -> str:
        return next((str(j["id"]) for j in serve.status().get("jobs", ())
                     if j.get("user") == user and j.get("site") == site
                     and str(j.get("native_id")) == native), "")
    wait_for(lambda: bool(found()), 180, f"{user}'s {site} job {native} placed",
             explain=lambda: serve.text()[-3000:])
    return found()


def _events(log: str, event: str) -> list[dict[str, str]]:
    return [dict(re.findall(r"(\w+)=(\S+)", line)) for line in log.splitlines()
            if f"event={event} " in line]


def _sacct(tb: Testbed, site: str, job: str) -> tuple[str, str]:
    """(user, state) of a Slurm job, from the accounting database."""
    out = tb.exec(site, ["sacct", "-X", "-n", "-P", "-j", job, "-o", "User,State"],
                  timeout=30, check=True).stdout.strip()
    user, state = out.splitlines()[-1].split("|") if out else ("", "")
    return user, state


def _completed(serve: Serve, job_id: str, timeout: float = 300) -> None:
    wait_for(lambda: serve.job(job_id).get("state") == "completed", timeout,
             f"{job_id} completed by the service", explain=lambda: serve.text()[-3000:])


def test_the_service_over_das3_mixed(mixed: Testbed, serve: Watched, tmp_path: Path,
                                     capsys: pytest.CaptureFixture[str]) -> None:
    tb = mixed
    report = [f"das3-mixed*{SCALE:g} up in {BRINGUP['up']:.1f} s: "
              + ", ".join(f"{s.name} {s.nodes} ({s.kind})" for s in TOPOLOGY.sites)]
    status = tb.status().to_json()
    assert {n: s["kind"] for n, s in status["sites"].items()} == {
        **dict.fromkeys(SLURM, "slurm"), **dict.fromkeys(OAR, "oar")}
    configs = {}
    for user in ("alice", "bob"):
        (tmp_path / user).mkdir()
        configs[user] = user_config(tb, (*SLURM, *OAR), user, tmp_path / user)
    tb.exec("multimedian", ["rm", "-f", "/home/alice/dm-stop", "/home/alice/dm-sizes"],
            user="alice")
    wait_for(lambda: "event=channel_listening" in serve.text(), 60, "the channel to listen")

    # alice on multimedian through her agent: grown 1 -> 3
    grown = _submit(configs["alice"], capsys, "multimedian", 1, 3, "sh", "-c", APP)
    a_oar = _service_id(serve, "alice", "multimedian", grown)
    wait_for(lambda: serve.job(a_oar).get("size") == 3, 240, "alice's OAR job grown to 3",
             explain=lambda: serve.text()[-3000:])
    # alice's two-site job: vu has more room than leiden
    both = _submit(configs["alice"], capsys, "vu,leiden", 1, 2, "sleep", "20")
    assert both.startswith("alice:")
    # bob's jobs: delft alone (grown), leiden alone (rigid), multimedian (shrinks alice's)
    b_delft = _service_id(serve, "bob", "delft", _submit(
        configs["bob"], capsys, "delft", 2, 4, "sleep", "20"))
    b_leiden = _service_id(serve, "bob", "leiden", _submit(
        configs["bob"], capsys, "leiden", 1, 1, "sleep", "10"))
    b_mm_native = _submit(configs["bob"], capsys, "multimedian", 3, 3, "sleep", "15")
    b_mm = _service_id(serve, "bob", "multimedian", b_mm_native)
    wait_for(lambda: serve.job(both).get("site") == "vu", 120, "alice's two-site job on vu",
             explain=lambda: serve.text()[-3000:])
    for job in (both, b_delft, b_leiden, b_mm):
        _completed(serve, job)
    wait_for(lambda: serve.job(a_oar).get("size") == 3, 240, "alice's OAR job grown back",
             explain=lambda: serve.text()[-3000:])
    tb.exec("multimedian", ["touch", "/home/alice/dm-stop"], user="alice", check=True)
    _completed(serve, a_oar)

    # what the service says, job by job
    records = {j["id"]: j for j in serve.status()["jobs"]}
    log = serve.text()
    for job in (a_oar, both, b_delft, b_leiden, b_mm):
        report.append(f"{job}: site {records[job]['site']} ({records[job]['native_id']}), "
              f"range [{records[job]['min']}, {records[job]['max']}], sizes seen "
              f"{serve.sizes.get(job)}, {records[job]['resizes']} resizes, "
              f"{records[job]['state']}")
    grows = [e for e in _events(log, "grown") if e.get("job") == a_oar]
    shrinks = [e for e in _events(log, "shrunk") if e.get("job") == a_oar]
    report.append(f"{a_oar} through its agent: grows {[e['seconds'] for e in grows]} s, "
                  f"shrinks {[e['seconds'] for e in shrinks]} s (decision to done)")
    with capsys.disabled():
        print("\n" + "\n".join(report))
    sizes = tb.exec("multimedian", ["cat", "/home/alice/dm-sizes"], user="alice",
                    check=True).stdout.split()
    assert sizes == ["1", "3", "2", "3"], sizes
    assert len(grows) == 2 and len(shrinks) == 1, (grows, shrinks)
    ext_ids = [int(i) for e in grows + shrinks for i in e["oar_ids"].split(",")]
    ran = oar_jobs(tb, "multimedian", *ext_ids)
    assert {j["owner"] for j in ran.values()} == {"alice"}
    assert records[both]["site"] == "vu" and records[both]["resizes"] >= 1
    assert records[b_delft]["site"] == "delft" and records[b_delft]["resizes"] >= 1
    assert (records[b_leiden]["site"], records[b_mm]["site"]) == ("leiden", "multimedian")

    # on the sites: end states, the leiden copy of the two-site job deleted
    assert _sacct(tb, "vu", str(records[both]["native_id"])) == ("alice", "COMPLETED")
    assert _sacct(tb, "delft", str(records[b_delft]["native_id"])) == ("bob", "COMPLETED")
    for site, job, owner in (("leiden", b_leiden, "bob"), ("multimedian", b_mm, "bob"),
                             ("multimedian", a_oar, "alice")):
        native = str(records[job]["native_id"])
        (done,) = parse_oarstat(tb.exec(site, ["oarstat", "-fJ", "-j", native],
                                        check=True).stdout)
        assert (done.owner, done.state) == (owner, JobState.COMPLETED), done
    copy = [line for line in log.splitlines()
            if f"event=copy_cancel job={both} site=leiden oar_id=" in line]
    assert len(copy) == 1, log[-3000:]
    leiden_copy = int(copy[0].split("oar_id=")[1].split()[0])
    (deleted,) = parse_oarstat(tb.exec("leiden", ["oarstat", "-fJ", "-j", str(leiden_copy)],
                                       check=True).stdout)
    assert (deleted.owner, deleted.state) == ("alice", JobState.CANCELLED)
    assert not re.search(r"site=(multimedian|leiden) slurm_id=", log)
    for site in OAR:
        wait_for(lambda s=site: not [j for j in oar_jobs(tb, s).values()  # type: ignore[misc]
                                     if j["owner"] in ("alice", "bob")], 120,
                 f"no job of alice or bob left on {site}")
    for site in SLURM:
        assert not tb.exec(site, ["squeue", "-h", "-u", "alice,bob", "-o", "%i"],
                           timeout=30, check=True).stdout.strip()
