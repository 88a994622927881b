"""The site service against a hostile local user, on the ``small`` testbed (issue 34).

``manager serve`` runs in the vu controller as ``malleable``; alice and bob are ordinary
users. bob squats every ``/tmp`` path of a job he can guess, as 0777, on every vu host,
before alice's ``--mpi`` job runs and is grown 2 -> 4: no file of her job is inside a
directory he owns. bob floods the channel (1,500 idle connections held, 500 bad
credentials naming his own ``--mpi``-tagged job on uva, the SSH site): the service keeps
cycling and alice's handshake from a compute node is answered within 10 s. root holds
bob's tagged job (``scontrol hold``): it stays held. Properties are asserted, not
mechanisms.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator

import pytest

from malleable.testbed import Testbed
from tests.fakes.waits import wait_for
from tests.integration.test_site_service import (
    CHANNEL,
    DELAY_FILE,
    EXAMPLES,
    HOME,
    Serve,
    _job,
    _result,
    _submit,
    _wait_quiet,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

#: bob's squat, on one host: every /tmp path of alice's next jobs he can guess, 0777.
SQUAT = r"""
umask 000
for n in $(seq "$1" "$2"); do
  for d in /tmp/malleable-alice/$n/ch /tmp/malleable-run/$n/ch /tmp/malleable-$n; do
    mkdir -p "$d"; chmod 0777 "$d" "$(dirname "$d")"
  done
  touch /tmp/malleable-$n.out; chmod 0666 /tmp/malleable-$n.out
done
chmod 0777 /tmp/malleable-alice /tmp/malleable-run
"""

#: Files alice owns under /tmp inside a directory bob owns (printed one per line).
INSIDE_BOBS = r"""
import os, pwd
alice, bob = pwd.getpwnam("alice").pw_uid, pwd.getpwnam("bob").pw_uid
for root, dirs, files in os.walk("/tmp"):
    for name in dirs + files:
        path = os.path.join(root, name)
        try:
            if os.lstat(path).st_uid != alice:
                continue
        except OSError:
            continue
        up = os.path.dirname(path)
        while up != "/":
            if os.lstat(up).st_uid == bob:
                print(path)
                break
            up = os.path.dirname(up)
"""

#: bob's flood from the vu controller: 1,500 idle connections, then 500 bad credentials
#: naming JOB on SITE, all held open until stdin closes; prints what it managed.
FLOOD = r"""
import json, socket, sys
host, port, site, job = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
idle, bad = [], []
for _ in range(1500):
    try:
        idle.append(socket.create_connection((host, port), timeout=5))
    except OSError:
        pass
sent = 0
for k in range(500):
    try:
        s = socket.create_connection((host, port), timeout=5)
        s.sendall(json.dumps({"hello": 1, "site": site, "job": job}).encode() + b"\n")
        s.recv(200)
        s.sendall(json.dumps({"cred": "MUNGE:" + "A" * 120 + str(k) + ":"}).encode() + b"\n")
        bad.append(s)
        sent += 1
    except OSError:
        pass
print(json.dumps({"idle": len(idle), "bad": sent}), flush=True)
sys.stdin.read()
"""

#: alice's handshake: her real MUNGE credential for JOB on SITE; prints the verdict and
#: the seconds from connect to verdict.
PROBE = r"""
import json, socket, subprocess, sys, time
host, port, site, job = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
began = time.monotonic()
s = socket.create_connection((host, port), timeout=30)
s.sendall(json.dumps({"hello": 1, "site": site, "job": job}).encode() + b"\n")
f = s.makefile("rb")
nonce = json.loads(f.readline())["nonce"]
cred = subprocess.run(["munge", "-s", f"malleable-channel:{site}:{job}:{nonce}"],
                      capture_output=True, text=True, check=True).stdout.strip()
s.sendall(json.dumps({"cred": cred}).encode() + b"\n")
verdict = json.loads(f.readline())
print(json.dumps({"verdict": verdict, "seconds": time.monotonic() - began}))
"""


@pytest.fixture
def service(small_testbed: Testbed) -> Iterator[Serve]:
    """test_site_service's ``serve`` fixture: a fresh state, everything cancelled after."""
    _wait_quiet(small_testbed)
    small_testbed.exec("vu", ["rm", "-rf", HOME], user="malleable", timeout=30, check=True)
    started = Serve(small_testbed)
    yield started
    print(started.text()[-8000:])  # shown by pytest when the test failed
    if started.pid():
        started.stop("KILL")
    started.sh(f"rm -rf {HOME}")
    for site in ("vu", "uva"):
        for user in ("alice", "bob", "malleable"):
            small_testbed.exec(site, ["scancel", "-u", user], timeout=30)
    _wait_quiet(small_testbed)


def _hosts(tb: Testbed, site: str) -> list[str]:
    return sorted({c.hostname for c in tb.containers() if c.site == site})


def _status(serve: Serve) -> dict[str, object]:
    data: dict[str, object] = json.loads(serve.as_malleable(
        "malleable", "manager", "status", "--json", "--config", serve.config))
    return data


def test_bobs_squatted_tmp_never_holds_a_file_of_alices_grown_mpi_job(
        small_testbed: Testbed, service: Serve) -> None:
    serve = service
    tb = small_testbed
    tb.exec("vu", ["sh", "-c", "test -f .ssh/id_ed25519 || { mkdir -p -m 700 .ssh && "
                   "ssh-keygen -q -t ed25519 -N '' -f .ssh/id_ed25519 && cat "
                   ".ssh/id_ed25519.pub >> .ssh/authorized_keys; }"], user="alice",
            timeout=30, check=True)
    tb.exec("vu", ["sh", "-c", "cat > jacobi.py"], user="alice", timeout=30, check=True,
            input_text=(EXAMPLES / "jacobi.py").read_text())
    # the next job ids, as bob learns them: his own job's id, then squat the next ones
    probe = tb.exec("vu", ["sbatch", "--parsable", "--hold", "--wrap", "true"], user="bob",
                    timeout=30, check=True).stdout.strip().split(";")[0]
    tb.exec("vu", ["scancel", probe], user="bob", timeout=30)
    for host in _hosts(tb, "vu"):
        tb.exec(host, ["sh", "-c", SQUAT, "sh", str(int(probe) + 1), str(int(probe) + 20)],
                user="bob", timeout=60, check=True)
    try:
        tb.exec("vu", ["sh", "-c", f"echo 0.5 > {DELAY_FILE}"], user="alice", timeout=30,
                check=True)
        grown = _submit(tb, "vu", "alice", "--min", "2", "--max", "4", "--initial", "2",
                        "--mpi", "--service", CHANNEL, "--", "jacobi.py", "--iterations",
                        "40", "--size", "64", "--delay", "0.5", "--delay-file", DELAY_FILE)
        assert int(probe) < int(grown) <= int(probe) + 20  # inside bob's squat
        serve.start()
        wait_for(lambda: re.search(r"event=mpi_resized site=vu job=alice:\w+ processes=2->4 "
                                   r"nodes=2->4 outcome=done", serve.text()) is not None, 240,
                 "alice's job grown 2 -> 4 through the channel")
        tb.exec("vu", ["sh", "-c", f"echo 0 > {DELAY_FILE}"], user="alice", timeout=30,
                check=True)
        wait_for(lambda: _result(tb, "vu", grown) is not None, 240, "the grown run's result")
        result = _result(tb, "vu", grown)
        assert result is not None and [p["size"] for p in result["phases"]] == [2, 4]
        for host in _hosts(tb, "vu"):
            inside = tb.exec(host, ["python3", "-c", INSIDE_BOBS], timeout=60,
                             check=True).stdout.split()
            assert inside == [], f"alice's files inside bob's directories on {host}: {inside}"
        mode = tb.exec("vu", ["stat", "-c", "%a %U", f"/home/alice/.malleable/run/{grown}"],
                       timeout=30, check=True).stdout.split()
        assert mode == ["700", "alice"]
    finally:
        for host in _hosts(tb, "vu"):
            tb.exec(host, ["sh", "-c", "rm -rf /tmp/malleable-*"], timeout=60)


def test_a_flood_on_the_channel_neither_stops_the_service_nor_locks_alice_out(
        small_testbed: Testbed, service: Serve) -> None:
    serve = service
    tb = small_testbed
    tag = json.dumps({"malleable_job": 1, "min": 1, "max": 1, "mpi": True},
                     separators=(",", ":"))
    bobs = tb.exec("uva", ["sbatch", "--parsable", "--hold", f"--comment={tag}", "-N1",
                           "--wrap", "sleep 600"], user="bob", timeout=30,
                   check=True).stdout.strip().split(";")[0]
    serve.start()
    wait_for(lambda: f"event=placed site=uva job=bob:uva.{bobs} " in serve.text(), 120,
             "bob's tagged job placed")
    before = int(str(_status(serve)["cycles"]))
    host, port = CHANNEL.split(":")
    flood = ("cat > flood.py && { sleep 120 | timeout 150 python3 flood.py "
             f"{host} {port} uva {bobs} > flood.out 2>&1 & echo $! > flood.pid; }}")
    tb.exec("vu", ["sh", "-c", flood], user="bob", input_text=FLOOD, timeout=30, check=True)
    try:
        wait_for(lambda: tb.exec("vu", ["cat", "flood.out"], user="bob",
                                 timeout=30).stdout.strip() != "", 100, "the flood sent")
        sent = json.loads(tb.exec("vu", ["cat", "flood.out"], user="bob",
                                  timeout=30).stdout)
        assert sent["bad"] >= 450, sent  # what bob managed (the service may drop some)
        began = time.monotonic()
        probe = tb.exec("vu-c0", ["python3", "-c", PROBE, host, port, "uva", bobs],
                        user="alice", timeout=60, check=True)
        took = time.monotonic() - began
        answer = json.loads(probe.stdout)
        assert answer["verdict"]["ok"] is False
        assert f"alice is not the owner of job {bobs}" in answer["verdict"]["error"]
        assert took < 10, f"alice's handshake took {took:.1f} s during the flood"
        wait_for(lambda: int(str(_status(serve)["cycles"])) >= before + 3, 60,
                 "the service cycling during the flood")
    finally:
        tb.exec("vu", ["sh", "-c", "kill $(cat flood.pid); rm -f flood.*"], user="bob",
                timeout=30)
    assert serve.pid(), "the service died"
    text = serve.text()
    assert "exit=" not in text
    assert text.count("event=channel_refused ") <= 60  # a summary, not a line per attempt
    # the drops are summed up in one line per period (gate.Limits.summary, 10 s, counted from
    # the service's start): a flood in its first seconds is summarized when the period ends
    wait_for(lambda: re.search(r"event=channel_dropped .*(over_peer_cap|rate_limited)",
                               serve.text()) is not None, 30,
             "the drops summarized in one line (event=channel_dropped)")


def test_an_administrators_hold_on_a_tagged_job_is_never_undone(
        small_testbed: Testbed, service: Serve) -> None:
    serve = service
    tb = small_testbed
    bobs = _submit(tb, "vu", "bob", "--min", "1", "--max", "2", "--", "sleep", "600")
    tb.exec("vu", ["scontrol", "hold", bobs], timeout=30, check=True)  # root: JobHeldAdmin
    assert _job(tb, "vu", bobs)["Reason"] == "JobHeldAdmin"
    serve.start()
    wait_for(lambda: f"event=admin_hold site=vu slurm_id={bobs} user=bob" in serve.text(), 60,
             "the hold seen")
    before = int(str(_status(serve)["cycles"]))
    wait_for(lambda: int(str(_status(serve)["cycles"])) >= before + 3, 60, "three cycles")
    job = _job(tb, "vu", bobs)
    assert (job["JobState"], job["Reason"]) == ("PENDING", "JobHeldAdmin")
    assert serve.text().count(f"event=admin_hold site=vu slurm_id={bobs} ") == 1
    shown = serve.as_malleable("malleable", "manager", "status", "--config", serve.config)
    assert f"held by an administrator (left held): {bobs}" in shown
