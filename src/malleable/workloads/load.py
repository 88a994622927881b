"""A workload from a command line's ``--workload``: a generator's name or an SWF file."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from malleable.errors import InputError
from malleable.model import JobSpec
from malleable.workloads.koala import KOALA_WORKLOADS, koala_workload
from malleable.workloads.swf import SwfTrace, read_swf, read_trace

if TYPE_CHECKING:
    from malleable.workloads.swf_plain import JobTable


def load_workload(name: str, seed: int) -> list[JobSpec]:
    """A KOALA workload by name (seeded), or the jobs of an SWF file."""
    if name in KOALA_WORKLOADS:
        return koala_workload(name, seed)
    path = Path(name)
    if not path.exists():
        valid = ", ".join(KOALA_WORKLOADS)
        raise InputError(f"workload {name!r} is neither a file nor one of {valid}")
    return read_swf(path).jobs


def simulation_workload(name: str, seed: int) -> list[JobSpec] | JobTable:
    """:func:`load_workload`'s jobs for ``simulate``: a plain SWF file's as a
    :class:`~malleable.workloads.swf_plain.JobTable` (the same jobs, each made when it is
    due: a million-job trace is not held as a million objects)."""
    if name in KOALA_WORKLOADS:
        return koala_workload(name, seed)
    return simulation_input(name, seed)[0]


def simulation_input(name: str, seed: int) -> tuple[list[JobSpec] | JobTable, SwfTrace | None]:
    """:func:`simulation_workload`'s jobs, and for an SWF file what was read of it (its
    header, skipped jobs and counts: :mod:`~malleable.workloads.swf_log` makes a real
    log's rules of them)."""
    if name in KOALA_WORKLOADS:
        return koala_workload(name, seed), None
    path = Path(name)
    if not path.exists():
        return load_workload(name, seed), None  # says what is wrong
    trace = read_trace(path)
    return trace.jobs, trace
