"""Speed of the quantum simulator: scheduling quanta per second.

500 Downey jobs on a random 5-level tree (256 processors, the experiment's default
time scale), AC-DS, AG-DS and EQUI-EQUI; one run alone, then ten repetitions batched
in one call as the experiment sweep does. Prints the figures; run with

    python3 benchmarks/bench_acds.py [--jobs 500] [--levels 5] [--reps 10]
"""

from __future__ import annotations

import argparse
import time

from malleable.sim.quantum.engine import Algorithm, Platform, RunSpec, simulate_many
from malleable.sim.quantum.scenario import scenario


def _time(runs: list[RunSpec]) -> tuple[float, float, int]:
    """Wall seconds, CPU seconds and quanta of one call."""
    wall, cpu = time.perf_counter(), time.process_time()
    outcomes = simulate_many(runs)
    return time.perf_counter() - wall, time.process_time() - cpu, outcomes[0].quanta


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=500)
    parser.add_argument("--levels", type=int, default=5)
    parser.add_argument("--reps", type=int, default=10)
    args = parser.parse_args()
    scs = [scenario(args.levels, args.jobs, (1, args.jobs, r)) for r in range(args.reps)]
    print(f"{args.jobs} jobs, K = {args.levels}, {Platform().processors:g} processors")
    print("(per CPU second as well as per wall second: the machine may be shared)")
    for alg in Algorithm:
        s = scs[0]
        wall, cpu, quanta = _time([RunSpec(s.jobs, s.leaf, s.tree, alg)])
        print(f"  {alg.value:10s} one run:    {quanta:6d} quanta, {wall:6.2f} s wall, "
              f"{cpu:6.2f} s CPU: {quanta / wall:7.0f} quanta/s, {quanta / cpu:7.0f} per CPU-s")
        wall, cpu, quanta = _time([RunSpec(s.jobs, s.leaf, s.tree, alg) for s in scs])
        runq = quanta * args.reps
        print(f"  {alg.value:10s} {args.reps} batched: {quanta:6d} quanta, {wall:6.2f} s wall, "
              f"{cpu:6.2f} s CPU: {runq / wall:7.0f} run-quanta/s, {runq / cpu:7.0f} per CPU-s")


if __name__ == "__main__":
    main()
