"""Real workload logs as they are (docs/workloads.md, "Real logs"): what an SWF header says
of the machine, and the rules that make a log of the Parallel Workloads Archive a run.

The reader (:mod:`~malleable.workloads.swf`) keeps every job with a known size and run
time; this module then applies the rules below to the jobs of a file and counts what each
one touched, for the summary (``trace``). Nothing is dropped or changed silently:

* **status** (field 11): a job is simulated as it ran whatever its status; a failed job or
  one cancelled after it started held its nodes for the run time the log gives. Counted by
  code (:data:`STATUS_NAMES`).
* **run time 0** (often a job cancelled before it started): simulated; it waits its turn,
  takes its nodes and ends at the instant it starts (as AccaSim does). ``runtime_zero``.
* **run time or size -1**: skipped by the reader (``skipped``).
* **size**: field 8 (requested processors), or field 5 (allocated) when 8 is -1
  (``size_from_allocated``).
* **requested time** (field 9) **missing** (-1): no wall time; EASY then expects the job to
  run forever (docs/simulate.md). ``walltime_missing``. **Below the run time**: the job
  runs its logged run time (the log says it did); the request stays its estimate, so EASY
  expects it to end now once it is past it. ``walltime_below_runtime``.
* **processors and nodes**: with ``MaxNodes`` and ``MaxProcs`` in the header and MaxProcs a
  whole multiple of MaxNodes, a node has MaxProcs / MaxNodes processors and a job takes
  its processors divided by that, rounded up to whole nodes (``rounded_up_to_nodes``
  counts those that were not whole). ``simulate --procs-per-node K`` says otherwise;
  ``--platform N`` takes processors as nodes unless ``--procs-per-node`` is also given.
  When most of a log's jobs are not whole nodes (:meth:`LogHeader.machine`), processors are
  the unit: ``MaxProcs`` one-processor nodes (``processors_as_nodes``, ``not_whole_nodes``).
* **submit times**: with ``UnixStartTime: 0`` in the header and a first submit time at or
  after :data:`EPOCH_FROM` (1973), the submit times are absolute Unix times: all are
  shifted by the first one, which then submits at 0 (``submit_shift_s``). Otherwise they
  are taken as they are (seconds from the log's start).
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from malleable.model import JobSpec
from malleable.workloads.swf_status import STATUS_NAMES  # noqa: F401 (re-exported)

if TYPE_CHECKING:
    from malleable.workloads.swf_plain import JobTable


EPOCH_FROM = 100_000_000
"""The least first submit time taken as a Unix time under ``UnixStartTime: 0`` (1973)."""

SHARED_NODES = 0.5
"""The share of a log's jobs that, when more of them than this are not whole nodes, makes
processors the unit of the header's platform (:meth:`LogHeader.machine`)."""

_FIELD = re.compile(r";\s*(MaxNodes|MaxProcs|UnixStartTime)\s*:\s*(-?\d+)")


@dataclass(frozen=True)
class LogHeader:
    """What an SWF header says of the machine and the clock (None: not said)."""

    max_nodes: int | None = None
    max_procs: int | None = None
    unix_start: int | None = None

    @classmethod
    def of(cls, lines: Sequence[str]) -> LogHeader:
        """The header's ``MaxNodes``, ``MaxProcs`` and ``UnixStartTime`` (the first whole
        number after each; ``MaxNodes: 32 (dual CPU)`` is 32). A count below 1 is None."""
        found: dict[str, int] = {}
        for line in lines:
            match = _FIELD.match(line)
            if match and match.group(1) not in found:
                found[match.group(1)] = int(match.group(2))
        nodes, procs = found.get("MaxNodes"), found.get("MaxProcs")
        return cls(nodes if nodes is not None and nodes > 0 else None,
                   procs if procs is not None and procs > 0 else None,
                   found.get("UnixStartTime"))

    @property
    def nodes(self) -> int | None:
        """The platform the header describes, in nodes: MaxNodes when MaxProcs is a whole
        multiple of it (or not given), else MaxProcs (processors as nodes); None when the
        header gives neither."""
        if self.max_nodes is not None and self.per_node() is not None:
            return self.max_nodes
        return self.max_procs

    def per_node(self) -> int | None:
        """Processors a node: MaxProcs / MaxNodes when whole, 1 when only one is given,
        None when both are given and MaxProcs is not a multiple of MaxNodes."""
        if self.max_nodes is None or self.max_procs is None:
            return 1
        if self.max_procs % self.max_nodes:
            return None
        return self.max_procs // self.max_nodes

    def machine(self, not_whole: int, jobs: int) -> tuple[int, int] | None:
        """The platform for a log of ``jobs`` jobs, ``not_whole`` of which ask for a number
        of processors that is not whole nodes of :meth:`per_node` processors: (nodes,
        processors a node). The header's nodes, unless most jobs (more than
        :data:`SHARED_NODES` of them) are not whole nodes: the machine then shared its nodes
        between jobs (RIKEN RICC 2010: 355,230 of 447,794), and rounding each job up to whole
        nodes would multiply its demand, so processors are the unit: ``MaxProcs``
        one-processor nodes. None when the header gives neither count."""
        nodes, per_node = self.nodes, self.per_node() or 1
        if nodes is None:
            return None
        if per_node > 1 and self.max_procs is not None and not_whole > SHARED_NODES * jobs:
            return self.max_procs, 1
        return nodes, per_node


def submit_shift(header: LogHeader, first_submit: float) -> float:
    """Seconds taken off every submit time: the first one when the header says
    ``UnixStartTime: 0`` and it looks like a Unix time, else 0."""
    if header.unix_start == 0 and first_submit >= EPOCH_FROM:
        return first_submit
    return 0.0


def as_log(jobs: list[JobSpec] | JobTable, header: LogHeader, per_node: int,
           counts: dict[str, int]) -> tuple[list[JobSpec] | JobTable, dict[str, int | float]]:
    """The jobs with the rules of the module applied (``per_node`` processors a node), and
    the counts for the summary's ``trace`` (``counts``: the reader's, by status...)."""
    if per_node < 1:
        raise ValueError(f"processors a node must be at least 1, not {per_node}")
    if not isinstance(jobs, list):
        shift = submit_shift(header, jobs.first_submit)
        table = jobs.as_log(shift, per_node)
        return table, _summary(table.counts, shift, per_node, len(table))
    first = min((spec.submit_time for spec in jobs), default=0.0)
    shift = submit_shift(header, first)
    made: list[JobSpec] = []
    odd = dict(counts)
    for spec in jobs:
        made.append(_job_as_log(spec, shift, per_node, odd))
    return made, _summary(odd, shift, per_node, len(made))


def _job_as_log(spec: JobSpec, shift: float, per_node: int, odd: dict[str, int]) -> JobSpec:
    def count(name: str, yes: bool) -> None:
        odd[name] = odd.get(name, 0) + int(yes)

    count("runtime_zero", spec.runtime == 0)
    count("walltime_missing", spec.walltime is None)
    count("walltime_below_runtime", spec.walltime is not None and spec.runtime is not None
          and spec.walltime < spec.runtime)
    count("rounded_up_to_nodes", per_node > 1 and spec.initial_size % per_node != 0)
    if not shift and per_node == 1:
        return spec

    def nodes(size: int) -> int:
        return math.ceil(size / per_node)

    preferred = spec.preferred_size
    return dataclasses.replace(
        spec, submit_time=spec.submit_time - shift, min_size=nodes(spec.min_size),
        max_size=nodes(spec.max_size), initial_size=nodes(spec.initial_size),
        preferred_size=nodes(preferred) if preferred is not None else None)


def _summary(counts: dict[str, int], shift: float, per_node: int, jobs: int
             ) -> dict[str, int | float]:
    keys = ("status_completed", "status_failed", "status_cancelled", "status_partial",
            "status_unknown", "status_other", "size_from_allocated", "runtime_zero",
            "walltime_missing", "walltime_below_runtime", "rounded_up_to_nodes")
    summary: dict[str, int | float] = {"jobs": jobs, "procs_per_node": per_node}
    summary.update({key: counts.get(key, 0) for key in keys})
    summary["submit_shift_s"] = shift
    return summary
