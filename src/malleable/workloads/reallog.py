"""A real machine's log (SWF, plain or gzipped), read as the numbers a study needs.

The file is read by the project's one SWF reader (:func:`malleable.workloads.swf.read_trace`:
gzip, the header, the field bounds and checks of docs/workloads.md); this module keeps,
per job, the submit time, the wait, the run time and the nodes it held, and from the
header the machine's nodes and processors per node, with its own rules for the studies of
real logs (issue 39: ``experiment elastic``, background load), each counted in
:attr:`RealLog.skipped`:

* size: allocated processors (field 5), else requested (field 8); a job without
  either (-1 or 0) is skipped (by the reader);
* run time (field 4) of -1 (by the reader) or 0: skipped (it held no node for any time);
* the status (field 11) is not used: a cancelled or failed job that ran held its
  nodes as long as it ran;
* a wait of -1 counts as 0;
* nodes = ceil(processors / processors per node), the processors per node being the
  header's ``MaxProcs / MaxNodes`` (1 when either is missing), capped at ``MaxNodes``;
* a wait above :data:`MAX_TIME` stops the read (the reader bounds the other fields);
  a file the vectorized reader does not take (not plain 18-field ASCII lines) is read
  line by line, without waits (0) and with the reader's size (field 8, else 5).
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from pathlib import Path

from malleable.errors import InputError

logger = logging.getLogger(__name__)

#: Largest wait (s) of a line.
MAX_TIME = 1_000_000_000


@dataclass(frozen=True)
class LogJob:
    """One job of a real log (times in seconds from the log's first submit)."""

    submit: float
    wait: float
    runtime: float
    nodes: int
    requested: float  # requested time, or the run time when the log has none


@dataclass(frozen=True)
class RealLog:
    """A real log: its jobs in submit order and its machine."""

    name: str
    jobs: tuple[LogJob, ...]
    nodes: int
    procs_per_node: int
    skipped: int

    @property
    def span(self) -> float:
        return self.jobs[-1].submit if self.jobs else 0.0


Row = tuple[float, float, float, float, float]


def _rows(path: Path) -> tuple[list[Row], list[str], int]:
    """(submit, wait, runtime, processors, requested) of the jobs that ran, in submit
    order; the header lines; the jobs skipped."""
    import numpy as np

    from malleable.workloads.swf import read_trace

    trace = read_trace(path)
    if isinstance(trace.jobs, list):
        logger.warning("%s: not a plain SWF log; read without waits", path)
        specs = sorted(trace.jobs, key=lambda j: j.submit_time)
        fields = np.array([(j.submit_time, 0.0, j.runtime if j.runtime is not None else -1.0,
                            j.initial_size, -1.0, j.walltime or -1.0) for j in specs],
                          dtype=float).reshape(-1, 6)
    else:
        fields = trace.jobs.log_fields()
    submit, wait, runtime, size, allocated, req_time = fields.T
    if len(wait) and float(wait.max()) > MAX_TIME:
        raise InputError(f"a wait above {MAX_TIME} s", source=str(path))
    ran = (runtime > 0) & (submit >= 0)
    procs = np.where(allocated > 0, allocated, size)
    requested = np.where(req_time > 0, req_time, runtime)
    rows = list(zip(submit[ran].tolist(), np.maximum(wait[ran], 0.0).tolist(),
                    runtime[ran].tolist(), procs[ran].tolist(), requested[ran].tolist(),
                    strict=True))
    return rows, trace.header, trace.skipped + int(np.count_nonzero(~ran))


def read_log(path: str | Path) -> RealLog:
    """The jobs of a real SWF log (``.swf`` or ``.swf.gz``); the reader's InputError for
    a file that is not SWF, or a log without a job that ran."""
    from malleable.workloads.swf_log import LogHeader

    path = Path(path)
    rows, lines, skipped = _rows(path)
    if not rows:
        raise InputError("no job that ran in the log", source=str(path))
    header = LogHeader.of(lines)
    max_nodes, max_procs = header.max_nodes or 0, header.max_procs or 0
    per_node = max(1, max_procs // max_nodes) if max_nodes > 0 and max_procs > 0 else 1
    if max_nodes <= 0:
        max_nodes = max(1, max_procs // per_node) if max_procs > 0 else int(
            max(math.ceil(r[3] / per_node) for r in rows))
    first = rows[0][0]
    jobs = tuple(LogJob(s - first, w, r, min(max_nodes, math.ceil(p / per_node)), q)
                 for s, w, r, p, q in rows)
    return RealLog(path.name, jobs, max_nodes, per_node, skipped)


def background_jobs(log: RealLog) -> tuple[tuple[float, float, float, int], ...]:
    """The log's jobs as :class:`~malleable.sim.background.TraceBackground` takes them."""
    return tuple((j.submit, j.wait, j.runtime, j.nodes) for j in log.jobs)


def window_loads(log: RealLog, length: float, step: float = 3600.0, sites: int = 1,
                 week: float = 7 * 86400.0) -> list[tuple[float, float]]:
    """(start, load) for windows of ``length`` s starting every ``step`` s: the load is the
    mean busy fraction of the log's machine as the log shows it (each job from submit +
    wait for its run time) over ``[s + i*week, s + i*week + length)`` for the ``sites``
    sites of a platform (site ``i`` replays ``i`` weeks later, wrapping round the log)."""
    import numpy as np

    starts = np.array([j.submit + j.wait for j in log.jobs])
    ends = starts + np.array([j.runtime for j in log.jobs])
    nodes = np.array([j.nodes for j in log.jobs], dtype=float)
    times = np.concatenate([starts, ends])
    deltas = np.concatenate([nodes, -nodes])
    order = np.argsort(times, kind="stable")
    times, busy = times[order], np.cumsum(deltas[order])
    area = np.concatenate([[0.0], np.cumsum(busy[:-1] * np.diff(times))])
    span = log.span

    def cumulative(t: np.ndarray) -> np.ndarray:
        result: np.ndarray = np.interp(t, times, area)
        return result

    candidates = np.arange(0.0, max(span - length, 0.0) + 1.0, step)
    total = np.zeros_like(candidates)
    for i in range(sites):
        begin = (candidates + i * week) % span if span > 0 else candidates
        total += (cumulative(begin + length) - cumulative(begin)) / (log.nodes * length)
    return [(float(s), float(u)) for s, u in zip(candidates, total / sites, strict=True)]


def quantile_windows(loads: list[tuple[float, float]], quantiles: tuple[float, ...]
                     ) -> list[tuple[float, float]]:
    """For each quantile ``q`` (0-1), the window whose load is at that quantile of all
    (the lowest start among equal loads): (start, load)."""
    ranked = sorted(loads, key=lambda w: (w[1], w[0]))
    return [ranked[min(len(ranked) - 1, round(q * (len(ranked) - 1)))] for q in quantiles]

