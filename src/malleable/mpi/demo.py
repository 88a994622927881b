"""Command-line plumbing shared by the example programs in ``examples/``.

Every example takes the same options: where resize decisions come from
(``--schedule 2,4,2``, ``--channel DIR`` from the runner, ``--dmr FILE`` for
DMRlib's rule over a resources file, or nothing for a fixed-size run), the
malleability parameters and inhibitors, requests the program makes itself (``--request 20:4``: at
iteration 20, ask for 4 processes), and ``--result FILE`` to write the phases
and the checksum as JSON. The last process set prints one line per phase and the
checksum.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from malleable.model import SizeRule
from malleable.mpi.channel import FileChannel, read_json
from malleable.mpi.params import Inhibitors, Params
from malleable.mpi.sources import DmrSource, ResizeSource, Resources, Scripted
from malleable.mpi.transfer import as_bytes, mpi


def parser(description: str, *, iterations: int, size: int) -> argparse.ArgumentParser:
    """An argument parser with the options every example shares."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--iterations", type=int, default=iterations, help="iterations to run")
    p.add_argument("--size", type=int, default=size, help="problem size (elements per axis)")
    src = p.add_mutually_exclusive_group()
    src.add_argument("--schedule", help="sizes per phase (2,4,2) or iteration:size pairs")
    p.add_argument("--hosts", default="",
                   help="with --schedule: hosts for the new processes, in rank order "
                        "(host or host:k, comma-separated)")
    src.add_argument("--channel", type=Path, help="directory of the runner's file channel")
    src.add_argument("--dmr", type=Path, metavar="FILE",
                     help="DMRlib's rule over a JSON file {available, pending}")
    p.add_argument("--min", type=int, default=1, help="minimum process count")
    p.add_argument("--max", type=int, default=64, help="maximum process count")
    p.add_argument("--preferred", type=int, default=None, help="preferred process count")
    p.add_argument("--every", type=int, default=1, help="check every K iterations")
    p.add_argument("--period", type=float, default=0.0, help="check at most every S seconds")
    p.add_argument("--result", type=Path, help="write phases and checksum here (JSON)")
    p.add_argument("--save", type=Path, help="write the final distributed array here (.npy)")
    p.add_argument("--delay", type=float, default=0.0, metavar="S",
                   help="sleep S seconds per iteration (to watch a demo)")
    p.add_argument("--delay-file", type=Path, default=None, metavar="FILE",
                   help="read the seconds to sleep from FILE at every iteration, when it "
                        "holds a number >= 0 (--delay otherwise): speed up or slow down a "
                        "running demo")
    p.add_argument("--request", type=parse_requests, default={}, metavar="I:N[,I:N]",
                   help="at iteration I, ask the runner for N processes in total "
                        "(application-initiated; with --channel)")
    return p


def parse_requests(text: str) -> dict[int, int]:
    """``"20:4,60:2"`` -> {20: 4, 60: 2}; argparse's error naming the bad pair."""
    requests: dict[int, int] = {}
    for pair in (part.strip() for part in text.split(",") if part.strip()):
        iteration, sep, size = pair.partition(":")
        try:
            if not sep:
                raise ValueError
            requests[int(iteration)] = int(size)
        except ValueError:
            raise argparse.ArgumentTypeError(
                f"bad request {pair!r}: write ITERATION:SIZE, like 20:4") from None
        if requests[int(iteration)] < 1 or int(iteration) < 0:
            raise argparse.ArgumentTypeError(
                f"bad request {pair!r}: needs an iteration >= 0 and a size >= 1")
    return requests


def slowed(step: Callable[[Any, Any, int], None], delay: float,
           delay_file: Path | None = None) -> Callable[[Any, Any, int], None]:
    """``step`` followed by a sleep of ``delay`` seconds (the demos' --delay), or of the
    seconds ``delay_file`` holds at that iteration (--delay-file)."""
    if delay <= 0 and delay_file is None:
        return step

    def slow(comm: Any, data: Any, iteration: int) -> None:
        step(comm, data, iteration)
        seconds = delay if delay_file is None else file_delay(delay_file, delay)
        if seconds > 0:
            time.sleep(seconds)

    return slow


def file_delay(path: Path, default: float) -> float:
    """The seconds written in ``path``; ``default`` while it is absent, unreadable or does
    not hold a finite number >= 0."""
    try:
        seconds = float(path.read_text())
    except (OSError, ValueError):
        return default
    return seconds if 0 <= seconds < math.inf else default


def params(args: argparse.Namespace, rule: SizeRule = SizeRule.ANY) -> Params:
    return Params(args.min, args.max, args.preferred, rule)


def inhibitors(args: argparse.Namespace) -> Inhibitors:
    return Inhibitors(args.period, args.every)


def source(args: argparse.Namespace) -> ResizeSource:
    """The resize source the options name (a schedule that never resizes by default)."""
    if args.schedule:
        hosts = tuple(h for h in args.hosts.split(",") if h)
        return replace(Scripted.parse(args.schedule, args.iterations), hosts=hosts)
    if args.channel:
        return FileChannel(args.channel)
    if args.dmr:
        return DmrSource(_file_probe(args.dmr))
    return Scripted({})


def _file_probe(path: Path) -> Any:
    def probe() -> Resources:
        data = read_json(path) or {}
        return Resources(int(data.get("available", 0)),
                         tuple(int(x) for x in data.get("pending", ())),
                         tuple(str(h) for h in data.get("hosts", ())))

    return probe


def report(args: argparse.Namespace, phases: Sequence[dict[str, Any]], checksum: float,
           name: str) -> None:
    """Print the phases and the checksum; write them to ``--result`` when given."""
    for k, phase in enumerate(phases, start=1):
        print(f"{name} phase {k}: {phase['size']} processes, iterations "
              f"{phase['iteration']}-{phase['end_iteration']}, {phase['seconds']:.3f} s "
              f"(reconfiguration {phase['reconfig_seconds']:.3f} s)", flush=True)
    print(f"{name} checksum: {checksum:.15e}", flush=True)
    if args.result is not None:
        args.result.write_text(json.dumps({"name": name, "checksum": checksum,
                                           "phases": list(phases)}, indent=2) + "\n")


def allgather(comm: Any, local: np.ndarray) -> np.ndarray:
    """Every process's rows of ``local``, concatenated in rank order (any dtype)."""
    counts = np.array(comm.allgather(len(local)), dtype=np.int64)
    full = np.empty((int(counts.sum()), *local.shape[1:]), dtype=local.dtype)
    row = local.dtype.itemsize * int(np.prod(local.shape[1:], dtype=np.int64))
    comm.Allgatherv([as_bytes(np.ascontiguousarray(local)), mpi().BYTE],
                    [as_bytes(full), (counts * row, None), mpi().BYTE])
    return full
