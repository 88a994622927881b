"""Run an example program on a Slurm site with a scripted resize schedule.

The runner, not the program, follows the schedule: the program runs with the
file channel, and when it passes the start of a phase the runner resizes the
allocation and the processes to the phase's size (grow: allocation first; shrink:
processes first). After each resize the runner reads back how many nodes Slurm
shows, so the report sets the process count beside the allocation.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import malleable
from malleable.errors import ExternalError, InputError

if TYPE_CHECKING:  # annotations only: the CLI reads EXAMPLES without loading paramiko
    from malleable.runner.job import Change, MpiJob

logger = logging.getLogger(__name__)

EXAMPLES = ("jacobi", "cg", "nbody", "fft")


def example_dirs() -> list[Path]:
    """Where the example programs are looked for, in order: ``examples/`` of the checkout
    malleable runs from, then ``share/malleable/examples`` of the installation (a wheel
    puts them there: pyproject.toml's data-files), under its prefix or the user's base."""
    import site
    import sys

    dirs = [Path(malleable.__file__).resolve().parents[2] / "examples"]
    for prefix in (sys.prefix, site.getuserbase()):
        dirs.append(Path(prefix) / "share" / "malleable" / "examples")
    return dirs


def example_source(name: str) -> tuple[str, str]:
    """(file name, text) of the example program ``NAME.py`` (:func:`example_dirs`)."""
    dirs = example_dirs()
    for root in dirs:
        path = root / f"{name}.py"
        if path.is_file():
            return path.name, path.read_text()
    raise InputError(f"example {name!r} not found in {', '.join(map(str, dirs))}: "
                     "reinstall malleable, or pass --program FILE")


def parse_schedule(text: str) -> list[int]:
    """``"2,4,2"`` -> [2, 4, 2]; InputError naming what is wrong."""
    try:
        sizes = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise InputError(f"--schedule {text!r}: write node counts like 2,4,2") from None
    if not sizes or min(sizes) < 1:
        raise InputError(f"--schedule {text!r}: needs one or more node counts >= 1")
    return sizes


@dataclass
class Step:
    """One resize of the schedule as it happened."""

    target: int
    change: Change
    slurm_nodes: int | None
    """Nodes Slurm shows right after the resize (None: the job had ended by then)."""
    iteration: int


@dataclass
class DemoRun:
    """A finished run: the resizes, the program's phases and its checksum."""

    slurm_id: int
    steps: list[Step] = field(default_factory=list)
    phases: list[dict[str, Any]] = field(default_factory=list)
    checksum: float | None = None
    exit_code: int | None = None
    events: list[dict[str, Any]] = field(default_factory=list)


def boundaries(schedule: Sequence[int], iterations: int) -> list[int]:
    """First iteration of each phase after the first (equal phases)."""
    return [iterations * k // len(schedule) for k in range(1, len(schedule))]


def run_schedule(job: MpiJob, schedule: Sequence[int], iterations: int, timeout: float,
                 tick: Callable[[int], None] = lambda i: None) -> DemoRun:
    """Submit at ``schedule[0]`` nodes, resize at each phase start, wait for the end."""
    job.submit(schedule[0])
    run = DemoRun(job.slurm_id or 0)
    try:
        job.wait_started(timeout)
        for start, target in zip(boundaries(schedule, iterations), schedule[1:], strict=True):
            iteration = _wait_iteration(job, start, timeout, tick)
            if iteration is None:
                break  # the program ended first
            change = job.resize_to(target)
            run.steps.append(Step(target, change, _slurm_nodes(job), iteration))
            logger.info("phase at iteration %d: %s", iteration, change)
        run.exit_code = job.wait_finished(timeout)
        tick(iterations)
    except BaseException:
        left = job.cancel()
        if left:
            logger.error("processes left after cancelling job %s: %s", job.slurm_id, left)
        raise
    result = job.result() or {}
    run.phases = list(result.get("phases", []))
    run.checksum = result.get("checksum")
    run.events = job.events()
    return run


def _slurm_nodes(job: MpiJob) -> int | None:
    look = job.look()
    if look is None or look.state not in ("RUNNING", "RESIZING"):
        return None
    return len(job.shell.hostnames(look.node_list))


def _wait_iteration(job: MpiJob, start: int, timeout: float,
                    tick: Callable[[int], None]) -> int | None:
    deadline = job.clock() + timeout
    while job.clock() < deadline:
        progress = job.progress() or {}
        iteration = int(progress.get("iteration", 0))
        tick(iteration)
        if iteration >= start:
            return iteration
        if job.ended():
            return None
        job.sleep(job.poll)
    raise ExternalError(f"job {job.slurm_id} did not reach iteration {start} within "
                        f"{timeout:.0f} s")
