"""CooRM speed figures: policy runs per second, message bytes per application, and the
network round trip of the service. Prints a table; takes a minute or two.

    python3 benchmarks/bench_coorm.py [--quick]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from sortedcontainers import SortedDict

from malleable.coorm.core import CooRMCore, CoreConfig
from malleable.coorm.policy import Busy, Interner, Waiting, schedule
from malleable.coorm.profile import Profile
from malleable.coorm.protocol import ListClustersInfo, Request, decode, encode
from malleable.coorm.resources import paper_platform
from malleable.coorm.service import CooRMService
from malleable.coorm.sim import simulate_coorm
from malleable.workloads.coorm import legacy_jobs, workload


def policy_runs_per_second(clusters: int, apps: int, seconds: float) -> float:
    """Full policy runs (views for every waiting app, changed or not) per second."""
    rng = random.Random(clusters * 1000 + apps)
    ids = [f"c{i + 1}" for i in range(clusters)]
    busy = [Busy(rng.choice(ids), rng.randint(1, 32), rng.uniform(10, 20_000))
            for _ in range(clusters * 6)]
    waiting = [Waiting(f"a{k}", tuple(ids),
                       Request(hosts={rng.choice(ids): rng.randint(1, 128)},
                               duration=rng.uniform(60, 10_000))) for k in range(apps)]
    caps = dict.fromkeys(ids, 128)
    runs, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        schedule(0.0, caps, busy, waiting, {}, Interner())
        runs += 1
    return runs / (time.perf_counter() - start)


def bytes_per_app(clusters: int, jobs: int) -> tuple[float, float, float]:
    """(CDR-like KB, JSON KB, messages) per application for a W0 pack under CooRM."""
    result = simulate_coorm(paper_platform(clusters), workload("W0", legacy_jobs(jobs, 7), 7),
                            CoreConfig(1.0, 5.0), count_json=True)
    n = len(result.jobs)
    t = result.traffic
    return t.cdr_bytes / 1e3 / n, t.json_bytes / 1e3 / n, t.messages / n


def profile_insert_us(steps: int) -> tuple[float, float]:
    """Microseconds per (insert an allocation + first-fit query): sorted lists vs SortedDict."""
    rng = random.Random(steps)
    ops = [(rng.uniform(0, 1e5), rng.uniform(10, 1e4), rng.randint(1, 3)) for _ in range(steps)]
    start = time.perf_counter()
    p = Profile(10**6)
    for s, d, n in ops:
        p.add(s, s + d, -n)
        p.first_fit(1, 10.0, 0.0)
    ours = (time.perf_counter() - start) / steps * 1e6
    start = time.perf_counter()
    sd = SortedDict({0.0: 10**6})
    for s, d, n in ops:
        for t in (s, s + d):
            if t not in sd:
                sd[t] = sd.peekitem(sd.bisect_right(t) - 1)[1]
        for t in list(sd.irange(s, s + d, inclusive=(True, False))):
            sd[t] -= n
        keys = list(sd.keys())  # a scan, as first_fit does
        _ = keys[0]
    theirs = (time.perf_counter() - start) / steps * 1e6
    return ours, theirs


async def _round_trips(count: int) -> list[float]:
    core = CooRMCore(paper_platform(8), CoreConfig(1.0, 5.0))
    service = CooRMService(core)
    _, port = await service.start()
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        writer.write(b'{"v":1,"type":"subscribe","filter":{},"name":"bench"}\n')
        await writer.drain()
        await reader.readline()
        samples = []
        line = encode(ListClustersInfo())
        for _ in range(count):
            t0 = time.perf_counter()
            writer.write(line)
            await writer.drain()
            reply = await reader.readline()
            samples.append(time.perf_counter() - t0)
            if decode(reply).TYPE != "clustersInfo":  # a view may arrive in between
                await reader.readline()
        return samples
    finally:
        writer.close()
        await service.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer, shorter measurements")
    args = parser.parse_args()
    seconds = 0.3 if args.quick else 1.5
    print("== policy runs per second (full FCFS + CBF pass, views for every waiting app)")
    print(f"{'clusters':>8} {'apps':>6} {'runs/s':>10}")
    for clusters in (1, 2, 4, 8):
        for apps in (10, 50, 200):
            rate = policy_runs_per_second(clusters, apps, seconds)
            print(f"{clusters:>8} {apps:>6} {rate:>10.1f}")
    print("\n== message bytes per application (W0 under CooRM, 1 s re-policy, 5 s fair-start)")
    print(f"{'clusters':>8} {'apps':>6} {'CDR KB':>8} {'JSON KB':>8} {'msgs':>6}")
    sizes = (25, 50) if args.quick else (50, 100, 200)
    for clusters in (1, 4, 8):
        for jobs in sizes:
            cdr, js, msgs = bytes_per_app(clusters, jobs)
            print(f"{clusters:>8} {jobs:>6} {cdr:>8.1f} {js:>8.1f} {msgs:>6.0f}")
    print("\n== profile: microseconds per insert + first-fit scan")
    print(f"{'steps':>8} {'lists':>8} {'SortedDict':>11}")
    for steps in (100, 1000, 5000):
        ours, theirs = profile_insert_us(steps)
        print(f"{steps:>8} {ours:>8.1f} {theirs:>11.1f}")
    print("\n== service round trip (listClustersInfo over 127.0.0.1, JSON lines)")
    samples = asyncio.run(_round_trips(300 if args.quick else 2000))
    samples.sort()
    print(f"median {statistics.median(samples) * 1e6:.0f} us, p99 "
          f"{samples[int(0.99 * (len(samples) - 1))] * 1e6:.0f} us over {len(samples)} trips")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
