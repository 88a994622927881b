"""What a run's figures need from each job, kept compactly while the records go by.

``simulate --out`` hands each job's record to a :class:`RunTrace` as it hands it to
``jobs.csv`` (the record is dropped afterwards); ``manager run --out`` builds one from its
records at the end. The trace holds numbers only (arrays of 8-byte values: about 50 bytes
a job, 5 MB for 100,000), and no plotting library: :mod:`malleable.metrics.runplots`
draws it.
"""

from __future__ import annotations

import logging
import math
import time
from array import array
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from malleable.errors import InputError
from malleable.metrics.records import JobRecord
from malleable.model import JobKind

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class Lane:
    """A cluster as the figures show it: its name and its nodes."""

    name: str
    nodes: int


class RunTrace:
    """Per job: submission, start, end (NaN when it did not happen), cluster (-1 for
    none), whether it is malleable; per size step of a job: the job, the step's time and
    size (a job that was never resized has one step, at its start)."""

    def __init__(self, lanes: Sequence[Lane]) -> None:
        self.lanes = tuple(lanes)
        self._index = {lane.name: i for i, lane in enumerate(self.lanes)}
        self.submit = array("d")
        self.start = array("d")
        self.end = array("d")
        self.cluster = array("i")
        self.malleable = array("b")
        self.step_job = array("q")
        self.step_time = array("d")
        self.step_size = array("q")

    @classmethod
    def of(cls, records: Iterable[JobRecord], lanes: Sequence[Lane]) -> RunTrace:
        trace = cls(lanes)
        for record in records:
            trace.add(record)
        return trace

    def __len__(self) -> int:
        return len(self.submit)

    def add(self, record: JobRecord, grows: int = 0, shrinks: int = 0) -> None:
        """One job's record (a record sink: ``simulate``'s ``sink`` signature)."""
        job = len(self.submit)
        spec = record.spec
        self.submit.append(spec.submit_time)
        self.start.append(math.nan if record.start is None else record.start)
        self.end.append(math.nan if record.end is None else record.end)
        self.cluster.append(self._index.get(record.cluster, -1))
        self.malleable.append(spec.kind is JobKind.MALLEABLE)
        for at, size in record.sizes:
            self.step_job.append(job)
            self.step_time.append(at)
            self.step_size.append(size)

    def __call__(self, record: JobRecord, grows: int, shrinks: int) -> None:
        self.add(record, grows, shrinks)


def draw_figures(trace: RunTrace, out: Path, title: str = "") -> list[Path]:
    """The run's figures (``usage.png``, ``gantt.png``) in ``out``; the files. matplotlib
    is imported here, only then; the CPU time drawing took is logged (``-v``)."""
    began = time.process_time()
    try:
        from malleable.metrics.runplots import draw_run
    except ImportError as exc:  # an install without the plotting library: the tables only
        logger.warning("no figures drawn: %s (install matplotlib, or pass --no-figures)", exc)
        return []
    try:
        files = draw_run(trace, out, title)
    except OSError as exc:
        raise InputError(f"cannot write a figure: {exc.strerror or exc} (give another --out, "
                         "or --no-figures)", source=str(out)) from None
    logger.info("figures of %d jobs drawn in %.2f s of CPU (matplotlib's import included)",
                len(trace), time.process_time() - began)
    return files
