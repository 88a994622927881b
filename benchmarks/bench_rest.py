"""The REST transport against the SSH transport, on one site of a testbed that is up.

    python3 benchmarks/bench_rest.py --name T [--site vu] [--repeat 10] [--jobs 10,1000]

In one run, on the same site:

* **resize latency**: a 1-node job of the service account grown to 3 and shrunk back to 1,
  ``--repeat`` times per transport, through :class:`~malleable.adapters.slurm.resize.Resizer`
  (decision to confirmed: the call until Slurm shows the size read back); p50 and p95.
  A version without REST expansion (22.05) reports the shrink only.
* **per poll**, with N held jobs of the service account in the queue (``--jobs``): REST
  requests and bytes received, SSH bytes of the poll's output, and the slurmctld RPCs
  each poll costs (``sdiag``'s per-message counts, summed, before and after 3 polls).

Prints one line per figure. The machine is shared: figures vary with its load.
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from malleable.adapters.slurm.ctl import SlurmCtl
from malleable.adapters.slurm.resize import Outcome, Resizer
from malleable.adapters.slurm.rest import RestCtl
from malleable.adapters.slurm.sites import ctl_for
from malleable.config import parse_config
from malleable.testbed import Testbed

SCRIPT = "#!/bin/bash\nsleep 3600\n"


def _ctls(tb: Testbed, site: str) -> tuple[SlurmCtl, RestCtl]:
    import tomllib

    ssh = ctl_for(parse_config(tomllib.loads(tb.config_toml())).site(site))
    rest = ctl_for(parse_config(tomllib.loads(tb.config_toml(rest=True))).site(site))
    assert isinstance(rest, RestCtl)
    return ssh, rest


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def resize_latency(ctl: SlurmCtl, label: str, repeat: int) -> None:
    job = ctl.submit(["--job-name=m.bench", "--nodes=1", "--exclusive", "--time=30"], SCRIPT)
    try:
        deadline = time.monotonic() + 60
        while (shown := ctl.show_job(job)) is None or not shown.state_raw.startswith("RUNNING"):
            if time.monotonic() > deadline:
                raise SystemExit(f"{label}: job {job} did not start")
            time.sleep(0.2)
        resizer = Resizer(ctl)
        grows: list[float] = []
        shrinks: list[float] = []
        for _ in range(repeat):
            began = time.monotonic()
            grown = resizer.resize(job, 3)
            if grown.outcome is Outcome.DONE:
                grows.append(time.monotonic() - began)
            began = time.monotonic()
            shrunk = resizer.resize(job, 1)
            if shrunk.outcome is Outcome.DONE:
                shrinks.append(time.monotonic() - began)
            time.sleep(resizer.rejoin_gap)
        for kind, values in (("expand", grows), ("shrink", shrinks)):
            if values:
                print(f"{label} {kind}: p50 {statistics.median(values) * 1000:.0f} ms, p95 "
                      f"{_pct(values, 0.95) * 1000:.0f} ms ({len(values)} of {repeat} done)")
            else:
                print(f"{label} {kind}: none done ({grown.reason or shrunk.reason})")
    finally:
        ctl.cancel(job)


def rpc_total(tb: Testbed, site: str) -> int:
    out = tb.exec(site, ["sdiag"], timeout=30, check=True).stdout
    part = out.split("Remote Procedure Call statistics by message type")[1]
    part = part.split("Remote Procedure Call statistics by user")[0]
    return sum(int(n) for n in re.findall(r"count:(\d+)", part))


def per_poll(tb: Testbed, site: str, ssh: SlurmCtl, rest: RestCtl, jobs: int) -> None:
    ids = [rest.submit(["--job-name=m.bench", "--nodes=1", "--time=5", "--hold"], SCRIPT)
           for _ in range(jobs)]
    try:
        rest.poll()  # the API version is asked once, before
        before_req, before_bytes = rest.client.requests, rest.client.bytes
        rpc0 = rpc_total(tb, site)
        for _ in range(3):
            rest.poll()
        rpc1 = rpc_total(tb, site)
        requests = (rest.client.requests - before_req) / 3
        received = (rest.client.bytes - before_bytes) / 3
        from malleable.adapters.slurm.ctl import _POLL

        out = ssh.runner.run(_POLL, 60).stdout
        rpc2 = rpc_total(tb, site)
        for _ in range(3):
            ssh.poll()
        rpc3 = rpc_total(tb, site)
        # each sdiag is one RPC itself: subtracted
        print(f"{jobs} jobs: REST {requests:.0f} requests, {received / 1024:.0f} KiB per poll, "
              f"{(rpc1 - rpc0 - 1) / 3:.1f} slurmctld RPCs per poll; SSH 1 command, "
              f"{len(out.encode()) / 1024:.0f} KiB per poll, "
              f"{(rpc3 - rpc2 - 1) / 3:.1f} slurmctld RPCs per poll")
    finally:
        for start in range(0, len(ids), 500):
            tb.exec(site, ["scancel", *map(str, ids[start:start + 500])], timeout=120)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--name", required=True, help="a testbed that is up")
    parser.add_argument("--site", default="vu")
    parser.add_argument("--repeat", type=int, default=10)
    parser.add_argument("--jobs", default="10,1000")
    args = parser.parse_args()
    tb = Testbed(args.name)
    ssh, rest = _ctls(tb, args.site)
    print(f"Slurm {tb.record().slurm}, REST API {'.'.join(map(str, rest.client.version()))}")
    try:
        resize_latency(ssh, "SSH", args.repeat)
        resize_latency(rest, "REST", args.repeat)
        for jobs in (int(j) for j in args.jobs.split(",")):
            per_poll(tb, args.site, ssh, rest, jobs)
    finally:
        ssh.runner.close()
        rest.runner.close()


if __name__ == "__main__":
    main()
