"""Slurm adapter figures on the real testbed: resize latency and an idle manager cycle.

    python3 benchmarks/bench_slurm.py [--samples 20] [--small NAME] [--five NAME] [--keep]

* shrink and expand latency (p50, p95): a running job on one site of the small
  topology is expanded 1 -> 3 nodes and shrunk back, ``--samples`` times; each time is
  from the request to the size confirmed by reading the job back (``scontrol``), over
  SSH. The 1.2 s the adapter waits between a shrink and an expansion of the same job
  (a node rejoining within a second revokes the job's credential) is kept out of the
  figures by pausing between samples;
* one manager cycle over 5 sites with nothing to do (das3 topology scaled to 0.1:
  8, 4, 7, 5 and 3 nodes), with the driver's parallel prefetch and without it.

Testbeds named with ``--small``/``--five`` are reused when up (brought up otherwise)
and left up; without names, uniquely named ones are brought up and taken down.
Cold and warm bring-up times: ``benchmarks/bench_bringup.py`` (the testbed's own).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from malleable.adapters.slurm import Outcome, Payload, SlurmCluster
from malleable.adapters.slurm.sites import ctl_for
from malleable.clock import ScaledClock
from malleable.config import load_config
from malleable.manager import Manager
from malleable.model import JobKind, JobSpec
from malleable.policies.koala import KoalaPolicy
from malleable.realtime import prefetch
from malleable.testbed import DAS3, SMALL, Testbed, Topology


def percentiles(values: list[float]) -> str:
    ordered = sorted(values)
    p50 = statistics.median(ordered)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return f"p50 {p50 * 1000:7.1f} ms   p95 {p95 * 1000:7.1f} ms   (n={len(ordered)})"


def testbed(name: str | None, topology: Topology, made: list[Testbed], label: str) -> Testbed:
    tb = Testbed(name or f"bench{os.getpid()}-{label}")
    if name is None:
        made.append(tb)
    began = time.monotonic()
    tb.up(topology)
    print(f"testbed {tb.name} ({topology.name}) up in {time.monotonic() - began:.1f} s")
    return tb


def config_of(tb: Testbed, directory: Path) -> Path:
    path = directory / f"{tb.name}.toml"
    path.write_text(tb.config_toml())
    return path


def resize_latency(config: Path, samples: int) -> None:
    site = load_config(config).site("vu")
    cluster = SlurmCluster("vu", ctl_for(site), ScaledClock(time.time()), f"bench{os.getpid()}",
                           Payload())
    spec = JobSpec("bench-1", JobKind.MALLEABLE, 1, 3, 1, app="fixed", runtime=3600.0)
    if cluster.start(spec, 1) != 1:
        raise SystemExit("could not submit the benchmark job")
    deadline = time.monotonic() + 30
    while "bench-1" not in cluster.observe().running:
        if time.monotonic() > deadline:
            raise SystemExit("the benchmark job did not start within 30 s")
        time.sleep(0.2)
    grow: list[float] = []
    shrink: list[float] = []
    try:
        for _ in range(samples):
            for amount, into, verb in ((2, grow, "grow"), (2, shrink, "shrink")):
                time.sleep(1.3)  # past the rejoin gap: measure Slurm, not the adapter's wait
                done = (cluster.offer_grow("bench-1", amount) if verb == "grow"
                        else cluster.request_shrink("bench-1", amount, True))
                result = cluster.resizes[-1]
                if done != amount or result.outcome is not Outcome.DONE:
                    raise SystemExit(f"{verb} failed: {result.describe()}")
                into.append(result.seconds)
    finally:
        cluster.cancel("bench-1")
        cluster.ctl.runner.close()
    print(f"expand 1->3 nodes (confirmed): {percentiles(grow)}")
    print(f"shrink 3->1 nodes (confirmed): {percentiles(shrink)}")


def idle_cycle(config: Path, samples: int) -> None:
    sites = load_config(config).sites
    clock = ScaledClock(time.time())
    adapters = {s.name: SlurmCluster(s.name, ctl_for(s), clock, f"bench{os.getpid()}",
                                     Payload()) for s in sites}
    manager = Manager(KoalaPolicy.named("pwa", "fpsma"), adapters)
    with ThreadPoolExecutor(max_workers=8) as pool:
        prefetch(pool, adapters)  # connect first: connection set-up is not a cycle
        manager.cycle(clock.now())
        for label, parallel in (("with parallel prefetch", True), ("sequential", False)):
            times = []
            for _ in range(samples):
                began = time.monotonic()
                if parallel:
                    prefetch(pool, adapters)
                manager.cycle(clock.now())
                times.append(time.monotonic() - began)
            print(f"idle manager cycle, {len(sites)} sites, {label}: {percentiles(times)}")
    for adapter in adapters.values():
        adapter.ctl.runner.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=20)
    parser.add_argument("--small", metavar="NAME", help="reuse (or bring up) this small testbed")
    parser.add_argument("--five", metavar="NAME", help="reuse (or bring up) this 5-site testbed")
    args = parser.parse_args()
    made: list[Testbed] = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            small = testbed(args.small, SMALL, made, "small")
            resize_latency(config_of(small, Path(tmp)), args.samples)
            five = testbed(args.five, DAS3.scaled(0.1), made, "five")
            idle_cycle(config_of(five, Path(tmp)), args.samples)
    finally:
        for tb in made:
            tb.down()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
