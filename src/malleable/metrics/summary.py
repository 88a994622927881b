"""Summaries of a run (simulated or real) and the per-job CSV records."""

from __future__ import annotations

import csv
import json
import math
import tempfile
from array import array
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import IO, Any

from malleable.errors import InputError
from malleable.metrics.records import JobRecord
from malleable.model import JobKind, JobState, Operation

#: Columns of the per-job CSV written by ``simulate`` and ``manager run`` (docs/simulate.md).
RECORD_COLUMNS = ("job", "kind", "app", "cluster", "state", "submit", "start", "end",
                  "wait_s", "execution_s", "response_s", "avg_size", "max_size",
                  "min_size", "max_allowed", "initial_size", "resizes", "grows", "shrinks")

CSV_DECIMALS = 6
"""Decimals a float keeps in a CSV cell: rounding for output only, so that
``45.99999999999999`` reads 46.0 (the computation keeps every bit)."""


def resize_counts(operations: Iterable[Operation]) -> dict[str, tuple[int, int]]:
    """``{job id: (grows, shrinks)}``: the grow and shrink operations the manager performed
    on each job, a grow at the instant the job starts included."""
    counts: dict[str, tuple[int, int]] = {}
    for op in operations:
        if op.kind in ("grow", "shrink"):
            grows, shrinks = counts.get(op.job_id, (0, 0))
            counts[op.job_id] = (grows + 1, shrinks) if op.kind == "grow" else (grows, shrinks + 1)
    return counts


def csv_cell(value: Any) -> Any:
    """A value as a CSV cell: NaN empty, floats rounded to :data:`CSV_DECIMALS`."""
    if isinstance(value, float):
        if value.is_integer():  # most times of a trace: round() would change nothing
            return value + 0.0  # no "-0.0"
        if math.isnan(value):
            return ""
        rounded = round(value, CSV_DECIMALS)
        return rounded + 0.0
    return value


def _cell_text(value: float | None) -> str:
    """What csv.writer writes for :func:`csv_cell` of ``value``: a float's repr (rounded as
    csv_cell rounds it), "" for NaN and None, anything else as ``str``."""
    if isinstance(value, float):
        if value.is_integer():
            return repr(value + 0.0)  # no "-0.0"
        if math.isnan(value):
            return ""
        return repr(round(value, CSV_DECIMALS) + 0.0)
    return "" if value is None else str(value)


#: Whether this module runs compiled (setup.py; its file is then the extension module).
_COMPILED = not __file__.endswith(".py")


def _whole(value: float) -> str:
    """``repr(value + 0.0)`` of a whole float (``value.is_integer()``), made from its int
    below 1e16 (where repr writes every digit and ".0"): compiled, no shortest-digits
    search (``_Py_dg_dtoa``, 3-4% of a FIFO run with jobs.csv). Plain Python, the call and
    ``int()`` cost more than ``repr``: :meth:`RecordWriter.add_ran` uses it compiled only."""
    if -1e16 < value < 1e16:
        return f"{int(value)}.0"
    return repr(value + 0.0)


def _needs_no_quotes(text: str) -> bool:
    """Whether csv.writer writes ``text`` as it is (QUOTE_MINIMAL: no delimiter, quote
    character or line end in it)."""
    return not ("," in text or '"' in text or "\r" in text or "\n" in text)


def write_records(path: Path, records: Iterable[JobRecord],
                  operations: Iterable[Operation]) -> None:
    """The per-job CSV of ``records``, counting each job's grows and shrinks in
    ``operations`` (the run's, as the summary counts them)."""
    counts = resize_counts(operations)
    with output_file(path) as out:
        writer = RecordWriter(out)
        for record in records:
            writer.add(record, *counts.get(record.spec.id, (0, 0)))


class RecordWriter:
    """The per-job CSV written one row at a time (the header first), as the jobs are
    handed over: ``simulate`` streams each job's row once it has ended, and then drops
    the job's record. ``resizes`` is ``grows + shrinks`` (the job's operations), so that the
    column sums to the summary's ``grow_ops + shrink_ops``; floats go through
    :func:`csv_cell`. Rows are tuples for ``csv.writer``: a ``DictWriter``'s per-row dict
    and field check took a quarter of a 100k-job FIFO run."""

    __slots__ = ("_enums", "_plain", "_write", "_writerow")

    def __init__(self, out: IO[str]) -> None:
        writer = csv.writer(out)
        writer.writerow(RECORD_COLUMNS)
        self._writerow = writer.writerow
        self._write = out.write
        self._plain: dict[str, bool] = {}  # kinds, states, apps, clusters: a few values
        # each JobKind's and JobState's text by the member's id, when it needs no quotes
        # (Enum's .value and __hash__ are Python code: two calls a row)
        self._enums = {id(member): member.value for members in (JobKind, JobState)
                       for member in members if _needs_no_quotes(member.value)}

    def add(self, record: JobRecord, grows: int = 0, shrinks: int = 0) -> None:
        spec = record.spec
        job_id, kind, app = spec.id, spec.kind.value, spec.app
        cluster, state = record.cluster, record.state.value
        plain = self._plain
        if (plain.get(kind) or self._check(kind)) and (plain.get(app) or self._check(app)) \
                and (plain.get(cluster) or self._check(cluster)) \
                and (plain.get(state) or self._check(state)) \
                and (job_id.isdigit() or _needs_no_quotes(job_id)):
            # the line csv.writer would write (tests/unit/test_record_writer.py), made
            # here: the csv module copies each field character by character, and checks
            # each for the characters that need quotes (about 30% faster so)
            self._write(
                f"{job_id},{kind},{app},{cluster},{state},{_cell_text(spec.submit_time)},"
                f"{_cell_text(record.start)},{_cell_text(record.end)},"
                f"{_cell_text(record.wait)},{_cell_text(record.execution)},"
                f"{_cell_text(record.response)},{_cell_text(record.avg_size)},"
                f"{record.max_size},{spec.min_size},{spec.max_size},{spec.initial_size},"
                f"{grows + shrinks},{grows},{shrinks}\r\n")
            return
        self._row(record, grows, shrinks)

    def add_ran(self, record: JobRecord, figures: tuple[float, float, float, float],
                size: int, grows: int, shrinks: int) -> None:
        """:meth:`add` for a job that ran at one ``size`` (start and end set, never
        resized), its wait, execution, response and average size given (:class:`Tee`)."""
        spec = record.spec
        job_id, app, cluster = spec.id, spec.app, record.cluster
        texts = self._enums
        kind = texts.get(id(spec.kind))
        state = texts.get(id(record.state))
        plain = self._plain
        if kind is None or state is None or not (
                (plain.get(app) or self._check(app))
                and (plain.get(cluster) or self._check(cluster))
                and (job_id.isdigit() or _needs_no_quotes(job_id))):
            self.add(record, grows, shrinks)
            return
        submit, start, end = spec.submit_time, record.start, record.end
        assert start is not None and end is not None  # (the caller's case)
        wait, execution, response, avg_size = figures
        if _COMPILED:  # a whole float's text from its int (see _whole)
            self._write(
                f"{job_id},{kind},{app},{cluster},{state},"
                f"{_whole(submit) if submit.is_integer() else _cell_text(submit)},"
                f"{_whole(start) if start.is_integer() else _cell_text(start)},"
                f"{_whole(end) if end.is_integer() else _cell_text(end)},"
                f"{_whole(wait) if wait.is_integer() else _cell_text(wait)},"
                f"{_whole(execution) if execution.is_integer() else _cell_text(execution)},"
                f"{_whole(response) if response.is_integer() else _cell_text(response)},"
                f"{_whole(avg_size) if avg_size.is_integer() else _cell_text(avg_size)},"
                f"{size},{spec.min_size},{spec.max_size},{spec.initial_size},"
                f"{grows + shrinks},{grows},{shrinks}\r\n")
            return
        # _cell_text inlined for the whole floats (most times of a trace)
        self._write(
            f"{job_id},{kind},{app},{cluster},{state},"
            f"{repr(submit + 0.0) if submit.is_integer() else _cell_text(submit)},"
            f"{repr(start + 0.0) if start.is_integer() else _cell_text(start)},"
            f"{repr(end + 0.0) if end.is_integer() else _cell_text(end)},"
            f"{repr(wait + 0.0) if wait.is_integer() else _cell_text(wait)},"
            f"{repr(execution + 0.0) if execution.is_integer() else _cell_text(execution)},"
            f"{repr(response + 0.0) if response.is_integer() else _cell_text(response)},"
            f"{repr(avg_size + 0.0) if avg_size.is_integer() else _cell_text(avg_size)},"
            f"{size},{spec.min_size},{spec.max_size},{spec.initial_size},"
            f"{grows + shrinks},{grows},{shrinks}\r\n")

    def _check(self, text: str) -> bool:
        """Whether ``text`` needs no quotes in a CSV cell (kept for the few repeated ones)."""
        plain = self._plain
        if len(plain) > 256:
            plain.clear()
        plain[text] = ok = _needs_no_quotes(text)
        return ok

    def _row(self, record: JobRecord, grows: int, shrinks: int) -> None:
        """The row through csv.writer (a field that needs quotes)."""
        spec = record.spec
        self._writerow((
            spec.id, spec.kind.value, spec.app, record.cluster, record.state.value,
            csv_cell(spec.submit_time), csv_cell(record.start), csv_cell(record.end),
            csv_cell(record.wait), csv_cell(record.execution), csv_cell(record.response),
            csv_cell(record.avg_size),
            record.max_size, spec.min_size, spec.max_size, spec.initial_size,
            grows + shrinks, grows, shrinks))


def _mean(values: Iterable[float]) -> float:
    """The mean of the values that are not NaN (NaN when none is), read once: a million
    jobs' figures are never held in a list at once. They are added in the same order as
    ``sum`` over a list would, so the result is the same to the last bit."""
    total, count = 0.0, 0
    for v in values:
        if not math.isnan(v):
            total += v
            count += 1
    return total / count if count else math.nan


def summarize(records: Sequence[JobRecord], operations: Sequence[Operation],
              makespan: float, utilization: float) -> dict[str, Any]:
    """The summary keys promised by ``malleable simulate --json``."""
    done = [r for r in records if r.end is not None and r.start is not None]
    return {
        "jobs": len(records),
        "completed": sum(1 for r in records if r.state.value == "completed"),
        "rejected": sum(1 for r in records if rejected(r)),
        "past_walltime": sum(1 for r in done if past_walltime(r)),
        "makespan_s": makespan,
        "utilization": utilization,
        "mean_wait_s": _mean(r.wait for r in done),
        "mean_execution_s": _mean(r.execution for r in done),
        "mean_response_s": _mean(r.response for r in done),
        "mean_avg_size": _mean(r.avg_size for r in done),
        "mean_max_size": _mean(float(r.max_size) for r in done),
        "grow_ops": sum(1 for op in operations if op.kind == "grow"),
        "shrink_ops": sum(1 for op in operations if op.kind == "shrink"),
    }


def rejected(record: JobRecord) -> bool:
    """Whether a job was refused without ever starting (larger than every cluster)."""
    return record.state is JobState.FAILED and record.start is None


def past_walltime(record: JobRecord) -> bool:
    """Whether a job ran longer than its requested time (its wall time): the simulator
    lets it run its recorded time (docs/simulate.md, "Requested times")."""
    walltime = record.spec.walltime
    return (walltime is not None and record.start is not None and record.end is not None
            and record.end - record.start > walltime)


def mechanism(records: Sequence[JobRecord], counts: dict[str, int] | None = None
              ) -> dict[str, Any]:
    """What a reader needs to see the malleability mechanism at work: ``never_grew`` (per
    application, malleable jobs whose size never went above their initial size),
    ``median_execution_s`` (per application, over the jobs that ended) and, for a policy
    that keeps them (KOALA's), ``grow_decisions`` and ``grow_decisions_multi`` (those with
    more than one job that would take some of the free nodes)."""
    done = [r for r in records if r.end is not None and r.start is not None]
    apps = sorted({r.spec.app for r in records})
    out: dict[str, Any] = {
        "never_grew": {a: sum(1 for r in done if r.spec.app == a and r.spec.malleable
                              and r.max_size <= r.spec.initial_size) for a in apps},
        "median_execution_s": {a: _median([r.execution for r in done if r.spec.app == a])
                               for a in apps},
    }
    if counts is not None:
        out.update(counts)
    return out


_COMPLETED, _MALLEABLE = JobState.COMPLETED, JobKind.MALLEABLE


class RunningSummary:
    """:func:`summarize` and :func:`mechanism` computed from the records handed over one at
    a time (in submission order, as ``summarize`` reads its list), without keeping them:
    running sums and counts, and per application only the execution times of the ended
    jobs (8 bytes each, for the medians). The figures are the same to the last bit: the
    sums are made in the same order."""

    _MEANS = ("mean_wait_s", "mean_execution_s", "mean_response_s", "mean_avg_size",
              "mean_max_size")

    def __init__(self) -> None:
        self.jobs = 0
        self.completed = 0
        self.rejected = 0
        self.past_walltime = 0
        self.grow_ops = 0
        self.shrink_ops = 0
        # each mean's sum and count, in the order of _MEANS: attributes, not lists, so that
        # a compiled build keeps them as machine numbers (no float object per addition)
        self._wait_sum = self._execution_sum = self._response_sum = 0.0
        self._avg_size_sum = self._max_size_sum = 0.0
        self._wait_n = self._execution_n = self._response_n = 0
        self._avg_size_n = self._max_size_n = 0
        self._never_grew: dict[str, int] = {}
        self._executions: dict[str, array[float]] = {}

    def add(self, record: JobRecord, grows: int = 0, shrinks: int = 0) -> None:
        """One job's record and the grows and shrinks the manager performed on it."""
        spec = record.spec
        self.jobs += 1
        self.grow_ops += grows
        self.shrink_ops += shrinks
        if record.state is JobState.COMPLETED:
            self.completed += 1
        elif record.state is JobState.FAILED and record.start is None:
            self.rejected += 1
        app = spec.app
        executions = self._executions.get(app)
        if executions is None:
            executions = self._executions[app] = array("d")
            self._never_grew[app] = 0
        start, end = record.start, record.end
        if end is None or start is None:
            return
        # wait, execution and response as JobRecord's properties compute them (b - a),
        # unrolled: no loop and no call per figure (add: 2.4 -> 1.05 us); v == v: not NaN
        submit = spec.submit_time
        wait, execution, response = start - submit, end - start, end - submit
        walltime = spec.walltime
        if walltime is not None and execution > walltime:
            self.past_walltime += 1
        avg_size, max_size = record.avg_size, record.max_size
        if wait == wait:
            self._wait_sum += wait
            self._wait_n += 1
        if execution == execution:
            self._execution_sum += execution
            self._execution_n += 1
        if response == response:
            self._response_sum += response
            self._response_n += 1
        if avg_size == avg_size:
            self._avg_size_sum += avg_size
            self._avg_size_n += 1
        self._max_size_sum += float(max_size)  # a size: never NaN
        self._max_size_n += 1
        executions.append(execution)
        if spec.malleable and max_size <= spec.initial_size:
            self._never_grew[app] += 1

    def add_ran(self, record: JobRecord, figures: tuple[float, float, float, float],
                size: int, grows: int, shrinks: int) -> None:
        """:meth:`add` for a job that ran at one ``size`` (start and end set, never
        resized), its wait, execution, response and average size given (:class:`Tee`)."""
        spec = record.spec
        self.jobs += 1
        self.grow_ops += grows
        self.shrink_ops += shrinks
        state = record.state
        if state is _COMPLETED:
            self.completed += 1  # (it started: not rejected, whatever its state)
        app = spec.app
        executions = self._executions.get(app)
        if executions is None:
            executions = self._executions[app] = array("d")
            self._never_grew[app] = 0
        wait, execution, response, avg_size = figures
        walltime = spec.walltime
        if walltime is not None and execution > walltime:
            self.past_walltime += 1
        if wait == wait:
            self._wait_sum += wait
            self._wait_n += 1
        if execution == execution:
            self._execution_sum += execution
            self._execution_n += 1
        if response == response:
            self._response_sum += response
            self._response_n += 1
        if avg_size == avg_size:
            self._avg_size_sum += avg_size
            self._avg_size_n += 1
        self._max_size_sum += float(size)
        self._max_size_n += 1
        executions.append(execution)
        if spec.kind is _MALLEABLE and size <= spec.initial_size:
            self._never_grew[app] += 1

    def summary(self, makespan: float, utilization: float) -> dict[str, Any]:
        """What :func:`summarize` returns for the records added."""
        out: dict[str, Any] = {"jobs": self.jobs, "completed": self.completed,
                               "rejected": self.rejected,
                               "past_walltime": self.past_walltime,
                               "makespan_s": makespan, "utilization": utilization}
        totals = ((self._wait_sum, self._wait_n), (self._execution_sum, self._execution_n),
                  (self._response_sum, self._response_n), (self._avg_size_sum, self._avg_size_n),
                  (self._max_size_sum, self._max_size_n))
        for key, (total, count) in zip(self._MEANS, totals, strict=True):
            out[key] = total / count if count else math.nan
        out.update(grow_ops=self.grow_ops, shrink_ops=self.shrink_ops)
        return out

    def mechanism(self, counts: dict[str, int] | None = None) -> dict[str, Any]:
        """What :func:`mechanism` returns for the records added."""
        apps = sorted(self._executions)
        out: dict[str, Any] = {
            "never_grew": {a: self._never_grew[a] for a in apps},
            "median_execution_s": {a: _median(self._executions[a].tolist()) for a in apps},
        }
        if counts is not None:
            out.update(counts)
        return out


class Tee:
    """A record sink (``simulate``'s ``sink``) that hands each record to a
    :class:`RecordWriter`, then to a :class:`RunningSummary`. A class of this module rather
    than a closure: compiled (setup.py), it calls both without an interpreted frame."""

    __slots__ = ("_totals", "_writer")

    def __init__(self, writer: RecordWriter, totals: RunningSummary) -> None:
        self._writer = writer
        self._totals = totals

    def __call__(self, record: JobRecord, grows: int, shrinks: int) -> None:
        first, start, end = record._first, record.start, record.end
        if first is None or start is None or end is None or record._later:
            self._writer.add(record, grows, shrinks)
            self._totals.add(record, grows, shrinks)
            return
        # The common case, a job that ran at one size: its figures made once here, as
        # JobRecord's properties make them (b - a; avg_size's very expression), for both
        # (one call each instead of ~20: properties, _span, _cell_text; a tenth of a FIFO
        # run's calls). tests/unit/test_record_writer.py checks it against add().
        submit = record.spec.submit_time
        execution = end - start
        avg_size = first * execution / execution if execution > 0 else float(first)
        figures = (start - submit, execution, end - submit, avg_size)
        self._writer.add_ran(record, figures, first, grows, shrinks)
        self._totals.add_ran(record, figures, first, grows, shrinks)


def _median(values: list[float]) -> float:
    """The median of ``values``, a list of the caller's own that this sorts in place (no
    second copy of a million figures)."""
    if not values:
        return math.nan
    values.sort()
    mid = len(values) // 2
    return values[mid] if len(values) % 2 else (values[mid - 1] + values[mid]) / 2


def utilization_series(timelines: dict[str, list[tuple[float, int]]],
                       total_nodes: int) -> list[tuple[float, float]]:
    """Merge per-cluster busy-node step functions into platform utilization over time."""
    changes: list[tuple[float, str, int]] = []
    for name, steps in timelines.items():
        changes.extend((t, name, busy) for t, busy in steps)
    changes.sort(key=lambda c: c[0])
    current: dict[str, int] = dict.fromkeys(timelines, 0)
    series: list[tuple[float, float]] = []
    busy = 0
    for t, name, value in changes:
        busy += value - current[name]
        current[name] = value
        if series and series[-1][0] == t:
            series[-1] = (t, busy / total_nodes)
        else:
            series.append((t, busy / total_nodes))
    return series


def output_dir(path: Path) -> Path:
    """``path`` created (with its parents) for a command's outputs, and checked writable
    (a file made and removed there), so that a read-only directory is refused before a
    run rather than after it; InputError naming the directory otherwise."""
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"cannot create output directory: {exc.strerror}",
                         source=str(path)) from None
    try:
        with tempfile.TemporaryFile(dir=path):
            pass
    except OSError as exc:
        raise InputError(f"cannot write in the output directory: {exc.strerror or exc} "
                         "(give another --out)", source=str(path)) from None
    return path


def output_file(path: Path) -> IO[str]:
    """``path`` opened for writing text (UTF-8, CSV newlines); InputError naming the file
    if it cannot be (a directory of that name, a read-only file)."""
    try:
        return path.open("w", newline="", encoding="utf-8")
    except OSError as exc:
        raise InputError(f"cannot write: {exc.strerror or exc} (give another --out)",
                         source=str(path)) from None


#: The name every experiment's numbers are written under (docs/experiments.md).
SUMMARY = "summary.json"
#: The older name of DMRlib's and CooRM's ``summary.json``, still written (same content)
#: so that scripts reading it keep working.
LEGACY_SUMMARY = "results.json"


def write_summary(out: Path, payload: Any, legacy: bool = False, **dump: Any) -> Path:
    """``payload`` as ``out/summary.json`` (and, with ``legacy``, the same text as
    ``out/results.json``); ``dump`` goes to :func:`json.dumps` (default ``indent=2``)."""
    text = json.dumps(payload, **({"indent": 2} | dump)) + "\n"
    path = out / SUMMARY
    path.write_text(text, encoding="utf-8")
    if legacy:
        (out / LEGACY_SUMMARY).write_text(text, encoding="utf-8")
    return path


def jsonable(value: Any) -> Any:
    """``value`` with every NaN (a mean of nothing) as None, so JSON stays standard."""
    if isinstance(value, dict):
        return {k: jsonable(v) for k, v in value.items()}
    if isinstance(value, float) and math.isnan(value):
        return None
    return value
