"""The site service's cycle and memory under a flood of its application channel (no testbed).

    python3 benchmarks/bench_abuse.py [--idle 1500] [--bad 500] [--cycles 80]
                                      [--period 0.1] [--unmunge-ms 100]

The real service objects (:func:`malleable.site.daemon.open_service` and the driver's
cycle, what ``malleable manager serve`` runs) over two fake Slurm sites of the tests:
``healthy`` (alice's jobs, placed and grown) and ``flooded``, where bob has a tagged
``--mpi`` job. The channel listens on loopback. One run measures, in order:

1. **baseline**: ``--cycles`` cycles, one per ``--period`` seconds, no flood;
2. **flood**: the same number of cycles while a client thread holds ``--idle`` idle
   connections and then sends ``--bad`` bad credentials naming bob's job (each check
   costs ``--unmunge-ms``, as an ``unmunge`` over SSH would: the service's verifier is
   replaced by a sleep that refuses).

Printed: each phase's cycle p50/p95/max (the cycle's own time, not the period), the p95
difference (the issue's target: under 0.2 s), the service's RSS before, at its peak and
after the flood, its thread count at the peak, and what the channel counted (connections
dropped by reason, refusals). Timings depend on the machine's load: say so with figures.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import socket
import statistics
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "src"), str(ROOT)]

from tests.fakes.slurm import FakeSlurm, node_names, settle  # noqa: E402

from malleable.adapters.slurm.ctl import SlurmCtl  # noqa: E402
from malleable.realtime import Outcome  # noqa: E402
from malleable.site import tag as tags  # noqa: E402
from malleable.site.assembly import open_service  # noqa: E402
from malleable.site.channel import Decoded  # noqa: E402
from malleable.site.config import parse_service_config  # noqa: E402
from malleable.site.daemon import SiteService  # noqa: E402
from malleable.site.driver import driver_for  # noqa: E402


def rss_kib() -> int:
    """This process's resident set (``VmRSS``, KiB)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


@dataclass
class Phase:
    cycles: list[float] = field(default_factory=list)

    def q(self, p: float) -> float:
        ordered = sorted(self.cycles)
        return ordered[min(len(ordered) - 1, int(p * len(ordered)))]


@dataclass
class Report:
    baseline: Phase
    flood: Phase
    rss_before: int
    rss_peak: int
    rss_after: int
    threads_peak: int
    idle_held: int
    bad_sent: int
    dropped: dict[str, int]
    refused: int

    @property
    def p95_rise(self) -> float:
        return self.flood.q(0.95) - self.baseline.q(0.95)


class Flood(threading.Thread):
    """bob's client: ``idle`` connections held, then ``bad`` bad credentials for ``job``."""

    def __init__(self, port: int, idle: int, bad: int, job: int) -> None:
        super().__init__(name="flood", daemon=True)
        self.port, self.idle, self.bad, self.job = port, idle, bad, job
        self.held: list[socket.socket] = []
        self.sent = 0
        self.idle_held = 0
        self.release = threading.Event()

    def run(self) -> None:
        for _ in range(self.idle):
            with contextlib.suppress(OSError):
                self.held.append(socket.create_connection(("127.0.0.1", self.port), 5))
        self.idle_held = len(self.held)
        for k in range(self.bad):
            try:
                sock = socket.create_connection(("127.0.0.1", self.port), 5)
                sock.sendall(json.dumps({"hello": 1, "site": "flooded", "job": self.job})
                             .encode() + b"\n")
                sock.recv(200)
                sock.sendall(json.dumps({"cred": f"MUNGE:bad{k}:"}).encode() + b"\n")
                self.held.append(sock)
                self.sent += 1
            except OSError:
                pass
        self.release.wait(60)
        for sock in self.held:
            sock.close()


def _cycles(service: SiteService, pool: ThreadPoolExecutor, count: int, period: float,
            phase: Phase, sample: list[tuple[int, int]]) -> None:
    driver = driver_for(service)
    driver.poll_timeout = 60.0
    for _ in range(count):
        began = time.perf_counter()
        driver._cycle(pool, Outcome(0, "", 0))
        settle(service.adapters.values())
        took = time.perf_counter() - began
        phase.cycles.append(took)
        sample.append((rss_kib(), threading.active_count()))
        time.sleep(max(0.0, period - took))


def run(idle: int, bad: int, cycles: int, period: float, unmunge_ms: float) -> Report:
    with tempfile.TemporaryDirectory() as tmp, ThreadPoolExecutor(4) as pool:
        fakes = {n: FakeSlurm(node_names(12), admin_levels={"malleable": "Operator"})
                 for n in ("healthy", "flooded")}
        doc = {"service": {"state": str(Path(tmp) / "state.sqlite"), "poll": 1.0,
                           "channel": "127.0.0.1:0"},
               "policy": {"name": "fpsma", "options": {"approach": "pwa"}},
               "clusters": {n: {} for n in fakes}}
        config = parse_service_config(doc, "bench", Path(tmp))
        service = open_service(config, lambda s: SlurmCtl(fakes[s.name], user="malleable"))
        assert service.channel is not None
        service.channel.start()
        for k in range(4):
            fakes["healthy"].add_job(1, tags.encode(tags.UserTag(1, 3, sub=f"a{k}")),
                                     user="alice", held=True)
        bobs = fakes["flooded"].add_job(1, tags.encode(tags.UserTag(1, 1, mpi=True)),
                                        user="bob", held=True)

        def slow_refusal(site: str, credential: str) -> Decoded:
            time.sleep(unmunge_ms / 1000)
            return Decoded(False, "", "", "Invalid credential format (4)")

        service._unmunge = slow_refusal  # type: ignore[method-assign]
        samples: list[tuple[int, int]] = []
        baseline, flooded = Phase(), Phase()
        _cycles(service, pool, 5, period, Phase(), samples)  # placed and grown: steady
        rss_before = rss_kib()
        _cycles(service, pool, cycles, period, baseline, samples)
        flood = Flood(service.channel.port, idle, bad, bobs.job_id)
        samples.clear()
        flood.start()
        _cycles(service, pool, cycles, period, flooded, samples)
        while flood.is_alive() and flood.sent + flood.idle_held < idle + bad \
                and len(flooded.cycles) < 20 * cycles:
            _cycles(service, pool, 1, period, flooded, samples)
        flood.release.set()
        flood.join(30)
        _cycles(service, pool, 5, period, Phase(), [])
        rss_after = rss_kib()
        channel = service.channel
        report = Report(baseline, flooded, rss_before, max(r for r, _ in samples),
                        rss_after, max(t for _, t in samples), flood.idle_held, flood.sent,
                        dict(channel.tally.total), channel.refused)
        service.close()
    return report


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--idle", type=int, default=1500)
    ap.add_argument("--bad", type=int, default=500)
    ap.add_argument("--cycles", type=int, default=80)
    ap.add_argument("--period", type=float, default=0.1)
    ap.add_argument("--unmunge-ms", type=float, default=100.0)
    args = ap.parse_args()
    logging.getLogger("malleable").setLevel(logging.ERROR)  # the refusals' lines: not here
    r = run(args.idle, args.bad, args.cycles, args.period, args.unmunge_ms)
    for name, phase in (("baseline", r.baseline), ("flood", r.flood)):
        print(f"{name:8s}: {len(phase.cycles)} cycles, p50 {phase.q(0.5) * 1000:.1f} ms, "
              f"p95 {phase.q(0.95) * 1000:.1f} ms, max {max(phase.cycles) * 1000:.1f} ms, "
              f"mean {statistics.fmean(phase.cycles) * 1000:.1f} ms")
    print(f"cycle p95 rise under the flood: {r.p95_rise * 1000:+.1f} ms (target < 200 ms)")
    print(f"RSS: {r.rss_before / 1024:.1f} MiB before, {r.rss_peak / 1024:.1f} MiB at the "
          f"peak of the flood, {r.rss_after / 1024:.1f} MiB after; threads at the peak: "
          f"{r.threads_peak} (pid {os.getpid()})")
    print(f"flood: {r.idle_held} idle connections held, {r.bad_sent} bad credentials sent; "
          f"channel dropped {json.dumps(r.dropped, sort_keys=True)}, refused {r.refused}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
