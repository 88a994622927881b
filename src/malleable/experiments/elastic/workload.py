"""The rule that makes a share of a real log's rigid jobs malleable (issue 39).

Zojer, Posner and Ozden (arXiv 2602.17318, 2026) convert a share of a real log's jobs to
malleable ones with a heuristic model the abstract does not give; this is **our** rule,
written down so that anyone can rerun it:

* **which jobs**: ``round(fraction * N)`` of the slice's ``N`` jobs, drawn uniformly
  without replacement by the seed (``random.Random(seed).sample``); the same seed and
  fraction always choose the same jobs, and a larger fraction does not contain a smaller
  one's choice (each fraction is its own draw);
* **sizes**: a job logged on ``p`` nodes has preferred size ``p``, minimum
  ``ceil(p / 2)`` and maximum ``min(2p, machine)``; it is submitted at its minimum
  (``initial = min``: it may start as soon as half of its nodes are free; where EASY
  starts it is ``start`` below);
* **speed-up**: Amdahl's law with serial fraction ``1 / (p - 1)`` (0 for ``p = 1``):
  the logged size is where the job runs at 50% parallel efficiency, so doubling it
  makes it ``4(p-1)/(3p-2)`` times faster (1.33x for large ``p``) and halving it
  ``(3p-4)/(2(p-1))`` times slower (1.5x); the logged run time is its time on
  ``p`` nodes (the model's base is rescaled to the initial size);
* **wall time**: the logged request (or the run time when the log has none), for EASY's
  reservations, whatever the size (as Slurm counts a time limit);
* rigid jobs stay as logged: ``fixed`` application, size ``p``;
* ``--size-range full`` (the reviewer's Lublin case of issue 39, "jobs made malleable
  1-128 nodes"): minimum 1 (also the initial size) and maximum the whole machine, the
  preferred size, speed-up and wall time as above. With the speed-up rule a job logged
  on 1 node then scales perfectly (serial fraction 0) and one logged on 2 nodes not at
  all (serial fraction 1): the rule's extremes, kept as they are (a reading).
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence

from malleable.model import JobKind, JobSpec
from malleable.workloads.reallog import LogJob


def serial_fraction(size: int) -> float:
    """Amdahl's serial fraction of a job logged on ``size`` nodes (50% efficient there)."""
    return 0.0 if size <= 1 else 1.0 / (size - 1)


def amdahl_time(serial: float, nodes: int) -> float:
    """Amdahl's time on ``nodes`` relative to one node."""
    return serial + (1.0 - serial) / nodes


SIZE_RANGES = ("logged", "full")


def convert(jobs: Sequence[LogJob], machine: int, fraction: float, seed: int,
            size_range: str = "logged") -> list[JobSpec]:
    """The log slice ``jobs`` with ``fraction`` (0-1) of them made malleable by the rule
    (``size_range``: ``logged``, sizes ceil(p/2)..2p; ``full``, 1..machine)."""
    if not 0.0 <= fraction <= 1.0:
        raise ValueError("the malleable fraction lies in [0, 1]")
    if size_range not in SIZE_RANGES:
        raise ValueError(f"size_range: one of {', '.join(SIZE_RANGES)}")
    count = round(fraction * len(jobs))
    chosen = set(random.Random(seed).sample(range(len(jobs)), count)) if count else set()
    specs: list[JobSpec] = []
    for index, job in enumerate(jobs):
        size = min(job.nodes, machine)
        walltime = max(job.requested, job.runtime)
        if index not in chosen:
            specs.append(JobSpec(f"j{index}", JobKind.RIGID, size, size, size,
                                 submit_time=job.submit, runtime=job.runtime,
                                 walltime=walltime))
            continue
        low, high = ((math.ceil(size / 2), min(2 * size, machine))
                     if size_range == "logged" else (1, machine))
        serial = serial_fraction(size)
        at_low = job.runtime * amdahl_time(serial, low) / amdahl_time(serial, size)
        specs.append(JobSpec(f"j{index}", JobKind.MALLEABLE, low, high, low,
                             submit_time=job.submit, app=f"amdahl:{serial!r}",
                             runtime=at_low, preferred_size=size, walltime=walltime))
    return specs
