"""A real machine's log (SWF, plain or gzipped), read as the numbers a study needs.

This is the small reader issue 39 needed before the SWF reader learnt gzip and real
logs' headers (issue 36, branch ``speed``): once that lands, :func:`read_log` can take
its rows instead. It keeps, per job, the submit time, the wait, the run time and the
nodes it held, and from the header the machine's nodes and processors per node.

Rules for real logs' oddities (each counted in :attr:`RealLog.skipped`):

* size: allocated processors (field 5), else requested (field 8); a job without
  either (-1 or 0) is skipped;
* run time (field 4) of -1 or 0: skipped (it held no node for any time);
* the status (field 11) is not used: a cancelled or failed job that ran held its
  nodes as long as it ran;
* a wait of -1 counts as 0;
* nodes = ceil(processors / processors per node), the processors per node being the
  header's ``MaxProcs / MaxNodes`` (1 when either is missing), capped at ``MaxNodes``;
* a line with fewer than 18 fields, a field that is not a number, a submit time above
  :data:`MAX_SUBMIT` (absolute Unix times are fine), a duration above :data:`MAX_TIME` or
  a size above :data:`MAX_SIZE` stops the read (file:line).
"""

from __future__ import annotations

import gzip
import math
import re
from dataclasses import dataclass
from pathlib import Path

from malleable.errors import InputError

#: Largest log read, in bytes once uncompressed (a hostile file stays bounded).
MAX_BYTES = 512 * 1024 * 1024
#: Largest submit time (s): absolute Unix times up to 2106 (Theta's log has them).
MAX_SUBMIT = 2**32
#: Largest wait, run or requested time (s) and size (processors) of a line.
MAX_TIME = 1_000_000_000
MAX_SIZE = 10_000_000
_HEADER = re.compile(r";\s*(\w+):\s*(\d+)")


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


def _text(path: Path) -> str:
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rb") as handle:
            data = handle.read(MAX_BYTES + 1)
    except (OSError, EOFError) as exc:
        raise InputError(f"cannot read the log: {exc}", source=str(path)) from None
    if len(data) > MAX_BYTES:
        raise InputError(f"log larger than {MAX_BYTES} bytes uncompressed", source=str(path))
    return data.decode("utf-8", errors="replace")


def read_log(path: str | Path) -> RealLog:
    """The jobs of a real SWF log (``.swf`` or ``.swf.gz``); InputError naming file:line
    for a line that is not SWF, or a log without a job that ran."""
    path = Path(path)
    header: dict[str, int] = {}
    rows: list[tuple[float, float, float, float, float]] = []
    skipped = 0
    for number, line in enumerate(_text(path).splitlines(), 1):
        line = line.strip()
        if not line:
            continue
        if line.startswith(";"):
            match = _HEADER.match(line)
            if match:
                header.setdefault(match.group(1), int(match.group(2)))
            continue
        fields = line.split()
        if len(fields) < 18:
            raise InputError(f"{len(fields)} fields, SWF has 18", source=f"{path}:{number}")
        try:
            submit, wait, runtime, alloc = (float(fields[i]) for i in (1, 2, 3, 4))
            requested, req_time = float(fields[7]), float(fields[8])
        except ValueError:
            raise InputError("a field is not a number", source=f"{path}:{number}") from None
        if (submit > MAX_SUBMIT or max(wait, runtime, req_time) > MAX_TIME
                or max(alloc, requested) > MAX_SIZE):
            raise InputError(f"a submit time above {MAX_SUBMIT} s, a duration above "
                             f"{MAX_TIME} s or a size above {MAX_SIZE}",
                             source=f"{path}:{number}")
        procs = alloc if alloc > 0 else requested
        if (procs <= 0 or runtime <= 0 or submit < 0 or not math.isfinite(submit + wait
                                                                              + runtime)):
            skipped += 1
            continue
        rows.append((submit, max(wait, 0.0), runtime, procs,
                     req_time if req_time > 0 else runtime))
    if not rows:
        raise InputError("no job that ran in the log", source=str(path))
    max_nodes, max_procs = header.get("MaxNodes", 0), header.get("MaxProcs", 0)
    per_node = max(1, max_procs // max_nodes) if max_nodes > 0 and max_procs > 0 else 1
    if max_nodes <= 0:
        max_nodes = max(1, max_procs // per_node) if max_procs > 0 else int(
            max(math.ceil(r[3] / per_node) for r in rows))
    rows.sort(key=lambda r: r[0])
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

