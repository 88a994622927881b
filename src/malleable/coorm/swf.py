"""The few Standard Workload Format (SWF) fields CooRM's workloads need.

A private, minimal reader until the core's ``malleable.workloads.swf`` lands on
main; to be replaced by it (see docs/coorm.md). Reads the 18 whitespace-separated
fields of each job line, skips ``;`` comment lines, and reports a malformed line
with its number.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from malleable.errors import InputError

FIELDS = 18


@dataclass(frozen=True, slots=True)
class SwfJob:
    """One job line: the fields CooRM uses (seconds, processors)."""

    id: int
    submit: float
    runtime: float
    processors: int
    requested_time: float
    """-1 when the trace does not say."""


def read_swf(path: Path) -> Iterator[SwfJob]:
    """The jobs of an SWF file, in file order; InputError on a malformed line."""
    try:
        handle = path.open(encoding="utf-8", errors="replace")
    except OSError as exc:
        raise InputError(f"cannot read the SWF trace: {exc.strerror}", source=str(path)) from None
    with handle:
        for number, line in enumerate(handle, start=1):
            text = line.strip()
            if not text or text.startswith(";"):
                continue
            yield _parse(text, str(path), number)


def _parse(text: str, source: str, number: int) -> SwfJob:
    parts = text.split()
    if len(parts) < FIELDS:
        raise InputError(f"expected {FIELDS} SWF fields, found {len(parts)} (is this an SWF "
                         "trace?)", source=source, line=number)
    try:
        values = [float(p) for p in parts[:FIELDS]]
    except ValueError:
        raise InputError("an SWF field is not a number", source=source, line=number) from None
    allocated, requested = int(values[4]), int(values[7])
    return SwfJob(id=int(values[0]), submit=values[1], runtime=values[3],
                  processors=allocated if allocated > 0 else requested,
                  requested_time=values[8])
