"""Benchmark: the DMRlib study's 2,000-job flexible workload, simulated end to end.

Prints wall and CPU time, jobs simulated per second and the resize operations, for
the flexible workload (the target) and, for comparison, the three other versions.

    python3 benchmarks/bench_dmrlib.py [--jobs 2000] [--seed 1] [--all]
"""

from __future__ import annotations

import argparse
import time

from malleable.experiments.dmrlib.results import VERSIONS
from malleable.experiments.dmrlib.study import Setup, run
from malleable.workloads.dmrlib import Version, draw


def bench(jobs: int, seed: int, version: Version) -> None:
    submission, mix = VERSIONS[version]
    workload = draw(jobs, seed)
    wall, cpu = time.perf_counter(), time.process_time()
    outcome = run(Setup(jobs, submission, mix, seed), workload)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    print(f"{version.value:>15}: {jobs} jobs in {wall:6.2f} s wall, {cpu:6.2f} s CPU "
          f"({jobs / cpu:7.0f} jobs/s CPU); simulated {outcome.workload_time:9.0f} s; "
          f"{outcome.grows} grows, {outcome.shrinks} shrinks")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--all", action="store_true", help="also the three other versions")
    args = parser.parse_args()
    bench(args.jobs, args.seed, Version.FLEXIBLE)
    if args.all:
        for version in (Version.FIXED, Version.PURE_MOLDABLE, Version.PURE_MALLEABLE):
            bench(args.jobs, args.seed, version)


if __name__ == "__main__":
    main()
