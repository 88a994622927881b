#!/usr/bin/env python3
"""Strict FIFO with first fit on one cluster, in SimPy: the yardstick of bench_sim.py.

    python3 simpy_fifo.py TRACE.swf [--nodes 128] [--starts STARTS.csv]

Reads a plain SWF trace as AccaSim does (submit field 2, run time field 4, size field 8,
or field 5 when -1; lines with an unknown run time or size are left out), runs it and
prints one JSON line; ``--starts`` writes ``job,start`` for the start-time comparison.
The queue head starts as soon as it fits, nothing passes it. Dispatching after each
event rather than once per instant starts the same jobs at the same times: nodes only
come back and the queue only grows at its tail within an instant.
"""

from __future__ import annotations

import argparse
import json
import time
from collections import deque
from collections.abc import Generator
from typing import Any

import simpy

Job = tuple[str, int, int, int]  # id, submit, size, run time


def read(path: str) -> list[Job]:
    jobs: list[Job] = []
    with open(path, encoding="utf-8") as trace:
        for line in trace:
            f = line.split()
            if not f or f[0].startswith(";"):
                continue
            size = int(f[7]) if int(f[7]) > 0 else int(f[4])
            if int(f[3]) >= 0 and size > 0:
                jobs.append((f[0], int(f[1]), size, int(f[3])))
    return jobs


def fifo(jobs: list[Job], nodes: int) -> dict[str, float]:
    env = simpy.Environment()
    queue: deque[Job] = deque()
    free = [nodes]
    starts: dict[str, float] = {}

    def run(job: Job) -> Generator[Any, Any, None]:
        yield env.timeout(job[3])
        free[0] += job[2]
        dispatch()

    def dispatch() -> None:
        while queue and queue[0][2] <= free[0]:
            job = queue.popleft()
            free[0] -= job[2]
            starts[job[0]] = env.now
            env.process(run(job))

    def arrivals() -> Generator[Any, Any, None]:
        for job in sorted(jobs, key=lambda j: j[1]):
            if job[1] > env.now:
                yield env.timeout(job[1] - env.now)
            queue.append(job)
            dispatch()

    env.process(arrivals())
    env.run()
    return starts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("trace")
    parser.add_argument("--nodes", type=int, default=128)
    parser.add_argument("--starts", help="write job,start lines here")
    args = parser.parse_args()
    begin = time.process_time()
    starts = fifo(read(args.trace), args.nodes)
    if args.starts:
        with open(args.starts, "w", encoding="utf-8") as out:
            out.writelines(f"{job},{start}\n" for job, start in starts.items())
    print(json.dumps({"jobs": len(starts), "cpu_s": time.process_time() - begin}))


if __name__ == "__main__":
    main()
