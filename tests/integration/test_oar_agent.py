"""``malleable manager serve`` grows and shrinks alice's job on an OAR testbed site through
her job's agent (one site, grid: 4 nodes in 2 containers).

The service runs in grid's OAR server as ``malleable`` with the application channel open
(KOALA PWA + FPSMA, 2-s polls). Alice submits with ``malleable submit --service`` over SSH
as herself: a held job of 1 node, range [1, 3], whose agent (her processes, in her base
job) connects to the channel and authenticates with MUNGE (the testbed's per-bring-up key;
the service decodes with ``unmunge`` on grid). The policy grows her job to 3 through her
agent (two extension jobs, hers in oarstat); bob's agent claiming her job is refused. Then
three times bob submits a rigid 2-node job: PWA shrinks alice's job to 2 to place it (her
agent releases one extension), and when bob's job ends FPSMA grows hers back to 3. Her
command records the sizes it reads in its run directory's ``size`` file. It ends; the
service reports it completed and no extension of hers is left.

Grow and shrink latency (from the policy's decision, ``decided=`` in the service's log, to
OAR showing the extensions Running, resp. ended: ``stopTime``) are printed as p50/p95.
Bounded by the test timeout; the module's testbed is taken down after its test.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Iterator
from pathlib import Path

import pytest

from malleable.cli import main
from malleable.testbed import Docker, Site, Testbed, Topology
from tests.fakes.accounts import user_config
from tests.fakes.serving import Serve, oar_jobs
from tests.fakes.waits import own_testbed, run_until, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(1200)]

TOPOLOGY = Topology("oar-agent", (Site("grid", 4, containers=2, kind="oar"),))
HOME = "/home/malleable/serve"
CHANNEL = "grid-ctl:7461"
ROUNDS = 3
#: Bob's job: seconds it sleeps. Alice stays at 2 nodes at least this long plus a poll and
#: her grow back (OAR starting an extension), while her command reads its size every 0.5 s.
BOB_SLEEPS = "4"
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

[clusters.grid]
kind = "oar"
host = "grid-ctl"
command_timeout = 120
"""
#: Alice's command: records each size it reads until she asks it to stop.
APP = ('last=; while [ ! -e "$HOME/oag-stop" ]; do n=$(cat "$MALLEABLE_RUN_DIR/size"); '
       'if [ "$n" != "$last" ]; then echo "$n" >> "$HOME/oag-sizes"; last=$n; fi; '
       'sleep 0.5; done')


@pytest.fixture(scope="module")
def oar(docker_engine: Docker, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Testbed]:
    yield from own_testbed("oag", TOPOLOGY, tmp_path_factory.mktemp("oar-agent"),
                           docker_engine)


@pytest.fixture
def serve(oar: Testbed) -> Iterator[Serve]:
    service = Serve(oar, "grid", HOME, CONFIG)
    try:
        yield service
    finally:
        oar.exec("grid", ["touch", "/home/alice/oag-stop"], user="alice")
        service.close()
        live = list(oar_jobs(oar, "grid"))
        if live:
            oar.exec("grid", ["su", "oar", "-s", "/bin/sh", "-c",
                              "oardel " + " ".join(map(str, live))])


def _submit(config: Path, capsys: pytest.CaptureFixture[str], low: int, high: int,
            *command: str) -> str:
    code = main(["submit", "--config", str(config), "--site", "grid", "--min", str(low),
                 "--max", str(high), "--time", "20", "--service", CHANNEL, "--", *command])
    out = capsys.readouterr().out.strip()
    assert code == 0, out
    return out


def _events(log: str, event: str) -> list[dict[str, str]]:
    return [dict(re.findall(r"(\w+)=(\S+)", line)) for line in log.splitlines()
            if f"event={event} " in line]


def _pct(values: list[float]) -> str:
    ordered = sorted(values)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return f"p50 {statistics.median(ordered):.2f} s, p95 {p95:.2f} s (n={len(ordered)})"


def test_alice_s_job_grows_and_shrinks_through_her_agent(
        oar: Testbed, serve: Serve, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    for user in ("alice", "bob"):
        (tmp_path / user).mkdir()
    alice_cfg = user_config(oar, ("grid",), "alice", tmp_path / "alice")
    bob_cfg = user_config(oar, ("grid",), "bob", tmp_path / "bob")
    oar.exec("grid", ["rm", "-f", "/home/alice/oag-stop", "/home/alice/oag-sizes"],
             user="alice")
    wait_for(lambda: "event=channel_listening" in serve.text(), 60, "the channel to listen")
    base = int(_submit(alice_cfg, capsys, 1, 3, "sh", "-c", APP))
    job_id = _service_id(serve, "alice", base)
    wait_for(lambda: serve.job(job_id).get("size") == 3, 240, "alice's job grown to 3",
             explain=lambda: serve.text()[-3000:])
    mine = [j for j in oar_jobs(oar, "grid").values() if j["name"] == f"malleable+{base}"]
    assert len(mine) == 2 and {j["owner"] for j in mine} == {"alice"}
    assert {j["state"] for j in mine} == {"Running"}
    # bob's agent claims alice's job: refused (his MUNGE credential says bob); it is
    # stopped once the service has logged the refusal (20 s at most)
    def bob_refused() -> bool:
        return any(e.get("user") == "bob" and e.get("oar_id") == str(base)
                   for e in _events(serve.text(), "channel_refused"))

    run_until(oar, "grid", "bob", ["python3", "-m", "malleable.site.agent", "--oar",
                                   "--service", CHANNEL, "--site", "grid", "--job", str(base),
                                   "--run-dir", "/home/bob/.malleable/oag"], bob_refused, 20,
              "bob's agent refused")
    refused = _events(serve.text(), "channel_refused")
    assert any(e.get("user") == "bob" and e.get("oar_id") == str(base) for e in refused)
    assert serve.job(job_id).get("size") == 3
    for _ in range(ROUNDS):
        bob = _service_id(serve, "bob", int(_submit(bob_cfg, capsys, 2, 2, "sleep", BOB_SLEEPS)))
        wait_for(lambda b=bob: serve.job(b).get("state") == "completed", 240,  # type: ignore[misc]
                 f"bob's job {bob} completed", explain=lambda: serve.text()[-3000:])
        wait_for(lambda: serve.job(job_id).get("size") == 3, 240, "alice's job grown back")
    oar.exec("grid", ["touch", "/home/alice/oag-stop"], user="alice", check=True)
    wait_for(lambda: serve.job(job_id).get("state") == "completed", 240,
             "alice's job completed", explain=lambda: serve.text()[-3000:])
    wait_for(lambda: not [j for j in oar_jobs(oar, "grid").values()
                          if j["owner"] == "alice"], 120, "none of alice's jobs left")
    sizes = oar.exec("grid", ["cat", "/home/alice/oag-sizes"], user="alice",
                     check=True).stdout.split()
    assert sizes == ["1", "3", *["2", "3"] * ROUNDS]
    log = serve.text()
    grows, shrinks = _events(log, "grown"), _events(log, "shrunk")
    assert len(grows) == 1 + ROUNDS and len(shrinks) == ROUNDS
    assert all(e["job"] == job_id for e in grows + shrinks)
    ext_ids = [int(i) for e in grows + shrinks for i in e["oar_ids"].split(",")]
    ran = oar_jobs(oar, "grid", *ext_ids)
    assert {j["owner"] for j in ran.values()} == {"alice"}
    assert {j["name"] for j in ran.values()} == {f"malleable+{base}"}
    gone = [max(ran[int(i)]["stopTime"] for i in e["oar_ids"].split(","))
            - float(e["decided"]) for e in shrinks]
    print(f"OAR grow through the agent (decision to Running): "
          f"{_pct([float(e['seconds']) for e in grows])}")
    print(f"OAR shrink through the agent (decision to released): "
          f"{_pct([float(e['seconds']) for e in shrinks])}; "
          f"(decision to OAR's stopTime, 1-s resolution): {_pct(gone)}")


def _service_id(serve: Serve, user: str, oar_id: int) -> str:
    """The service's id of a user's OAR job, once the service adopted it."""
    def adopted() -> list[str]:
        return [str(j["id"]) for j in serve.status().get("jobs", ())
                if j.get("user") == user and j.get("native_id") == oar_id]
    wait_for(lambda: bool(adopted()), 120, f"{user}'s job {oar_id} adopted",
             explain=lambda: serve.text()[-3000:])
    return adopted()[0]
