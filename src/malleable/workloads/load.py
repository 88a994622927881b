"""A workload from a command line's ``--workload``: a generator's name or an SWF file."""

from __future__ import annotations

from pathlib import Path

from malleable.errors import InputError
from malleable.model import JobSpec
from malleable.workloads.koala import KOALA_WORKLOADS, koala_workload
from malleable.workloads.swf import read_swf


def load_workload(name: str, seed: int) -> list[JobSpec]:
    """A KOALA workload by name (seeded), or the jobs of an SWF file."""
    if name in KOALA_WORKLOADS:
        return koala_workload(name, seed)
    path = Path(name)
    if not path.exists():
        valid = ", ".join(KOALA_WORKLOADS)
        raise InputError(f"workload {name!r} is neither a file nor one of {valid}")
    return read_swf(path).jobs
