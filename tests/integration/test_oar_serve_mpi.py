"""``malleable manager serve`` grows and shrinks alice's Jacobi (``malleable submit --mpi``)
on an OAR testbed site through her job's agent (one site, grid: 4 nodes in 2 containers).

The service runs in grid's OAR server as ``malleable`` with the application channel open
(KOALA PWA + FPSMA, 2-s polls). Alice submits two ``--mpi`` Jacobi runs over SSH as
herself, held, 2 nodes each: a fixed one (range [2, 2]) and a malleable one ([2, 4]). The
service resumes them (``oarresume`` as ``oar``); each base job runs ``mpirun`` with the
job's agent beside it. When the fixed run ends, FPSMA grows the malleable one to 4 (2 -> 4,
or in steps when OAR starts an extension late): the agent submits the extension jobs as
alice, the new hosts are offered to the program through its file channel and it answers.
Then bob submits a rigid 2-node job: PWA shrinks alice's job 4 -> 2 (offered first; her
extensions released by her agent once the smaller set took over), places bob, and grows
hers back when he is done. Her run ends with the fixed run's
checksum; every extension job was hers, and none is left.

Grow latency (the policy's decision to the program running on the new set: its completion
report, ``seconds=`` of the service's ``event=mpi_resized``) is printed as p50/max.
Bounded by the test timeout; the module's testbed is taken down after its test.
"""

from __future__ import annotations

import json
import math
import re
import statistics
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from malleable.cli import main
from malleable.testbed import Docker, Site, Testbed, Topology
from tests.fakes.accounts import user_config
from tests.fakes.serving import Serve, oar_jobs
from tests.fakes.waits import own_testbed, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(1500)]

TOPOLOGY = Topology("oar-serve-mpi", (Site("grid", 4, containers=2, kind="oar"),))
HOME = "/home/malleable/serve"
CHANNEL = "grid-ctl:7461"
JACOBI = Path(__file__).resolve().parents[2] / "examples" / "jacobi.py"
#: The same problem for both runs (the checksum does not depend on the delay): the fixed
#: run is quick (600 x 0.03 s: it must still hold its 2 nodes when the malleable one is
#: placed), the malleable one long enough for a grow, a shrink and a grow back (600 x 0.35 s:
#: at load 10 the grow back was done at iteration 370 of 600 x 0.3 s, about 111 s in; the
#: iteration of each phase's start is printed to watch that margin).
PROBLEM = ("--iterations", "600", "--size", "64", "--max", "4")
FIXED_DELAY, GROWN_DELAY = "0.03", "0.35"
#: Once the last resize the test checks (the grow back) is done, the test writes 0 here:
#: the malleable run's remaining iterations run without the delay (--delay-file), so the
#: test does not wait out a margin it no longer needs (the margin until then is unchanged).
DELAY_FILE = "/home/alice/jacobi-grown.delay"
#: Bob's rigid job runs until this file exists (at most BOB_BOUND s): the test writes it once
#: alice's Jacobi is seen shrunk to 2 for it. A fixed ``sleep 15`` held it before, waited
#: out in full after the shrink before the grow back could begin.
BOB_DONE = "/home/bob/oar-serve-mpi.done"
BOB_BOUND = 240
BOB_JOB = (f"i=0; while [ ! -e {BOB_DONE} ] && [ $i -lt {BOB_BOUND * 2} ]; "
           "do sleep 0.5; i=$((i+1)); done")
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


@pytest.fixture(scope="module")
def oar(docker_engine: Docker, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Testbed]:
    yield from own_testbed("omp", TOPOLOGY, tmp_path_factory.mktemp("oar-serve-mpi"),
                           docker_engine)


@pytest.fixture
def serve(oar: Testbed) -> Iterator[Serve]:
    service = Serve(oar, "grid", HOME, CONFIG)
    try:
        yield service
    finally:
        service.close()
        live = list(oar_jobs(oar, "grid"))
        if live:
            oar.exec("grid", ["su", "oar", "-s", "/bin/sh", "-c",
                              "oardel " + " ".join(map(str, live))])


def _submit(config: Path, capsys: pytest.CaptureFixture[str], *args: str) -> int:
    code = main(["submit", "--config", str(config), "--site", "grid", "--time", "30",
                 "--service", CHANNEL, *args])
    out = capsys.readouterr().out.strip()
    assert code == 0, out
    return int(out)


def _events(log: str, event: str) -> list[dict[str, str]]:
    return [dict(re.findall(r"(\w+)=(\S+)", line)) for line in log.splitlines()
            if f"event={event} " in line]


def _result(oar: Testbed, job: int) -> dict[str, object] | None:
    out = oar.exec("grid", ["cat", f"/home/alice/malleable-{job}.result.json"], user="alice",
                   timeout=60)
    return json.loads(out.stdout) if out.returncode == 0 and out.stdout.strip() else None


def _resized(log: str, job_id: str, grow: bool) -> list[dict[str, str]]:
    """The service's grows (or shrinks) of the job through its agent, from its log."""
    found = []
    for e in _events(log, "mpi_resized"):
        before, _, after = e["size"].partition("->")
        if e["job"] == job_id and int(after) != int(before) and (
                int(after) > int(before)) == grow:
            found.append(e)
    return found


def _afters(log: str, job_id: str) -> list[int]:
    """The job's size after each of the service's resizes through its agent, in order."""
    return [int(e["size"].partition("->")[2]) for e in _events(log, "mpi_resized")
            if e["job"] == job_id and e["size"].partition("->")[0] != e["size"].partition(
                "->")[2]]


def _subsequence(wanted: list[int], seen: list[int]) -> bool:
    rest = iter(seen)
    return all(any(x == w for x in rest) for w in wanted)


def _service_id(serve: Serve, user: str, oar_id: int) -> str:
    """The service's id of a user's OAR job, once the service adopted it."""
    def adopted() -> list[str]:
        return [str(j["id"]) for j in serve.status().get("jobs", ())
                if j.get("user") == user and j.get("native_id") == oar_id]
    wait_for(lambda: bool(adopted()), 180, f"{user}'s job {oar_id} adopted",
             explain=lambda: serve.text()[-3000:])
    return adopted()[0]


def test_alice_s_jacobi_grows_and_shrinks_on_oar_through_her_agent(
        oar: Testbed, serve: Serve, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    for user in ("alice", "bob"):
        (tmp_path / user).mkdir()
    alice_cfg = user_config(oar, ("grid",), "alice", tmp_path / "alice")
    bob_cfg = user_config(oar, ("grid",), "bob", tmp_path / "bob")
    # alice's own key to reach her nodes (mpirun's rsh launcher; the shared home)
    oar.exec("grid", ["sh", "-c", "test -f .ssh/id_ed25519 || ssh-keygen -q -t ed25519 -N '' "
                      "-f .ssh/id_ed25519; cat .ssh/id_ed25519.pub >> .ssh/authorized_keys"],
             user="alice", timeout=60, check=True)
    wait_for(lambda: "event=channel_listening" in serve.text(), 60, "the channel to listen")
    fixed = _submit(alice_cfg, capsys, "--min", "2", "--max", "2", "--mpi", "--",
                    str(JACOBI), *PROBLEM, "--delay", FIXED_DELAY)
    grown = _submit(alice_cfg, capsys, "--min", "2", "--max", "4", "--mpi", "--",
                    str(JACOBI), *PROBLEM, "--delay", GROWN_DELAY, "--delay-file", DELAY_FILE)
    names = {j["name"] for j in oar_jobs(oar, "grid", fixed, grown).values()}
    assert all(";mpi" in n for n in names), names
    job_id = _service_id(serve, "alice", grown)

    def explain() -> str:
        return serve.text()[-4000:] + "\n" + json.dumps(oar_jobs(oar, "grid"))[-2000:]

    wait_for(lambda: _result(oar, fixed) is not None, 400, "the fixed run's result",
             explain=explain)
    # when the fixed run's nodes are free, FPSMA grows alice's (in one or more steps: an
    # extension OAR does not start within grow_wait is released and asked again later)
    wait_for(lambda: 4 in _afters(serve.text(), job_id), 400, "alice's Jacobi grown to 4",
             explain=explain)
    # bob's rigid job: PWA shrinks alice's to place it, then grows hers back once it ends
    oar.exec("grid", ["rm", "-f", BOB_DONE], user="bob", timeout=60, check=True)
    _submit(bob_cfg, capsys, "--min", "2", "--max", "2", "--", "sh", "-c", BOB_JOB)
    wait_for(lambda: _afters(serve.text(), job_id)[-1:] == [2], 400,
             "alice's Jacobi shrunk to 2 for bob", explain=explain)
    oar.exec("grid", ["touch", BOB_DONE], user="bob", timeout=60, check=True)
    bob_told = time.monotonic()
    wait_for(lambda: _afters(serve.text(), job_id)[-1:] == [4], 400,
             "alice's Jacobi grown back to 4", explain=explain)
    oar.exec("grid", ["sh", "-c", f"echo 0 > {DELAY_FILE}"], user="alice", timeout=60,
             check=True)
    back_at = time.monotonic()
    wait_for(lambda: _result(oar, grown) is not None, 600, "the grown run's result",
             explain=explain)
    print(f"\nalice's Jacobi seen grown back {back_at - bob_told:.1f} s after bob's job was "
          f"told to end (it slept 15 s before); the grown run ended "
          f"{time.monotonic() - back_at:.1f} s after it was seen grown back (without the delay)")
    malleable, reference = _result(oar, grown), _result(oar, fixed)
    assert malleable is not None and reference is not None
    log = serve.text()
    events = [e for e in _events(log, "mpi_resized") if e["job"] == job_id]
    phases = [p["size"] for p in malleable["phases"]]  # type: ignore[attr-defined]
    assert phases == [2, *_afters(log, job_id)], (phases, events)  # one phase per resize
    assert _subsequence([2, 4, 2, 4], phases), phases
    assert all(e["processes"] == e["size"] for e in events), events  # the program took all
    assert [p["size"] for p in reference["phases"]] == [2]  # type: ignore[attr-defined]
    assert math.isclose(malleable["checksum"], reference["checksum"],  # type: ignore[arg-type]
                        rel_tol=1e-12)
    grows, shrinks = _resized(log, job_id, True), _resized(log, job_id, False)
    ext_ids = [int(i) for e in grows + shrinks for i in e["oar_ids"].split(",")]
    ran = oar_jobs(oar, "grid", *ext_ids)
    assert len(ran) == len(set(ext_ids)) >= 4
    assert {j["owner"] for j in ran.values()} == {"alice"}
    assert {j["name"] for j in ran.values()} == {f"malleable+{grown}"}
    wait_for(lambda: not [j for j in oar_jobs(oar, "grid").values()
                          if j["owner"] == "alice"], 180, "none of alice's jobs left")
    seconds = sorted(float(e["seconds"]) for e in grows)
    running = sorted(max(float(ran[int(i)]["startTime"]) for i in e["oar_ids"].split(","))
                     - float(e["decided"]) for e in grows)
    starts = [p["iteration"] for p in malleable["phases"]]  # type: ignore[attr-defined]
    print(f"\nJacobi on OAR through the agent: sizes {phases}, from iterations {starts} of "
          f"{PROBLEM[1]}; checksum {malleable['checksum']!r} = fixed {reference['checksum']!r}")
    print(f"grow, decision to the program on the new set: p50 "
          f"{statistics.median(seconds):.2f} s, max {seconds[-1]:.2f} s (n={len(seconds)}); "
          f"decision to the extensions' OAR startTime (1-s resolution): p50 "
          f"{statistics.median(running):.2f} s, max {running[-1]:.2f} s")
    print(f"shrink, decision to released: "
          f"{', '.join(e['seconds'] + ' s' for e in shrinks)}")
