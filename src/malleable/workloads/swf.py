"""SWF 2.2 (Standard Workload Format) with malleable fields, read and written.

A plain SWF file (18 whitespace-separated fields a line, ``;`` comments) reads as
rigid jobs of the ``fixed`` application: size from field 8 (requested processors)
or field 5 (allocated) when 8 is -1, run time from field 4, wall time from field 9.
Jobs whose run time or size is unknown (-1) cannot be simulated: they are skipped
and counted (:attr:`SwfWorkload.skipped`).

The malleable extension (docs/workloads.md) appends five fields to each line:

====  ==================================================================
 19   job kind: 0 rigid, 1 moldable, 2 malleable (-1: rigid)
 20   minimum size (-1: the size of fields 8/5)
 21   maximum size (-1: the size of fields 8/5)
 22   preferred size (-1: none)
 23   application number, named in the header by ``; MalleableApp: N NAME``
      (-1: ``fixed``, which needs the run time of field 4)
====  ==================================================================

The size of fields 8/5 is the job's initial size. The header line
``; MalleableFormat: 1`` marks such a file. Lines have 18 or 23 fields; anything
else, a non-numeric field, a value outside its bounds (:data:`BOUNDS`: only -1 means
unknown), a minimum above the maximum, an unknown application, an FT job whose initial
size is not a power of two, an unknown format version or an application number named
twice stops the read with an :class:`InputError` naming file:line. A file without a
job to simulate is refused as a whole (:func:`read_swf`).
"""

from __future__ import annotations

import gzip
import logging
import math
import re
import zlib
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

from malleable.apps import AppCatalog, standard_catalog
from malleable.errors import InputError, read_text
from malleable.model import JobKind, JobSpec, SizeRule
from malleable.workloads.swf_status import STATUS_NAMES

if TYPE_CHECKING:
    from malleable.workloads.swf_plain import JobTable

logger = logging.getLogger(__name__)

_KINDS = {-1: JobKind.RIGID, 0: JobKind.RIGID, 1: JobKind.MOLDABLE, 2: JobKind.MALLEABLE}
_KIND_CODES = {JobKind.RIGID: 0, JobKind.MOLDABLE: 1, JobKind.MALLEABLE: 2}
_APP_LINE = re.compile(r";\s*MalleableApp:\s*(\d+)\s+(\S+)\s*$")
_APP_TAG = re.compile(r";\s*MalleableApp\b")
_FORMAT_LINE = re.compile(r";\s*MalleableFormat:\s*(.*?)\s*$")
FORMAT_VERSIONS = ("1",)
"""The ``; MalleableFormat: V`` versions this reader knows."""

MAX_TIME = 1_000_000_000
"""Largest run or wall time, in seconds (about 31.7 years)."""
MAX_SUBMIT = 2**32 - 1
"""Largest submit time, in seconds: a Unix time up to 2106 (a log whose header says
``UnixStartTime: 0`` gives absolute times; :mod:`~malleable.workloads.swf_log`)."""
MAX_SIZE = 10_000_000
"""Largest job size (processors or nodes)."""
MAX_NUMBER = 2**31 - 1
"""Largest job, user, group or application number."""


@dataclass(frozen=True)
class Bound:
    """The values one SWF field may hold: [low, high], whole numbers or not, and whether
    -1 (unknown) is allowed. No other negative value means unknown."""

    field: int
    name: str
    low: int
    high: int
    whole: bool = True
    unknown: bool = True
    unit: str = ""

    def problem(self, token: str, value: float) -> str:
        """Why ``value`` (written ``token``) is not allowed here, or ""."""
        if self.unknown and value == -1:
            return ""
        if self.whole and not value.is_integer():
            return f"{self.name} {token} (field {self.field}) is not a whole number"
        if self.low <= value <= self.high:
            return ""
        what = f"negative {self.name}" if value < 0 else self.name
        return f"{what} {token} (field {self.field}) is outside {self.span()}"

    def span(self) -> str:
        text = f"[{self.low}, {self.high}]{self.unit}"
        return f"{text} or -1 (unknown)" if self.unknown else text


#: The bounds of the fields the reader uses (docs/workloads.md, "Bounds").
BOUNDS: tuple[Bound, ...] = (
    Bound(1, "job number", 0, MAX_NUMBER, unknown=False),
    Bound(2, "submit time", 0, MAX_SUBMIT, whole=False, unknown=False, unit=" s"),
    Bound(4, "run time", 0, MAX_TIME, whole=False, unit=" s"),
    Bound(5, "allocated size", 1, MAX_SIZE),
    Bound(8, "requested size", 1, MAX_SIZE),
    Bound(9, "requested time", 1, MAX_TIME, whole=False, unit=" s"),
    Bound(12, "user number", 0, MAX_NUMBER),
    Bound(13, "group number", 0, MAX_NUMBER),
)
#: The bounds of the malleable extension's fields (19, the kind, is checked by code).
MALLEABLE_BOUNDS: tuple[Bound, ...] = (
    Bound(20, "minimum size", 1, MAX_SIZE),
    Bound(21, "maximum size", 1, MAX_SIZE),
    Bound(22, "preferred size", 1, MAX_SIZE),
    Bound(23, "application number", 0, MAX_NUMBER),
)


@dataclass
class SwfWorkload:
    """The jobs of an SWF file and what was left out."""

    jobs: list[JobSpec]
    skipped: int = 0
    header: list[str] = field(default_factory=list)
    #: the kept jobs by status (``status_completed``...) and those sized by field 5
    #: (:mod:`~malleable.workloads.swf_log`)
    counts: dict[str, int] = field(default_factory=dict)


@dataclass
class SwfTrace:
    """The jobs of an SWF file for a simulation (:func:`read_trace`), its header lines, the
    jobs skipped and the reader's counts."""

    jobs: list[JobSpec] | JobTable
    header: list[str]
    skipped: int
    counts: dict[str, int]


def read_swf(path: str | Path, catalog: AppCatalog | None = None) -> SwfWorkload:
    """Read a (malleable) SWF file; InputError with file:line on bad input, and for a
    file that is not UTF-8 text or holds no job to simulate.

    Application names are checked against ``catalog`` (the standard one by default).
    A leading UTF-8 byte-order mark is dropped. A file whose data lines all have 18 fields
    or all 23 (ASCII) is read by :func:`read_plain`, vectorized, into the same workload;
    any other file, and any file with an error, by :func:`parse_swf`.
    """
    path = Path(path)
    catalog = catalog if catalog is not None else standard_catalog()
    try:
        workload = read_plain(path, catalog)
        if workload is None:  # not a plain file read in full: line by line, as it was
            with open_text(path) as handle:  # BOM: dropped
                workload = parse_swf(_lines(handle), str(path), catalog)
    except OSError as exc:
        raise InputError(f"cannot read workload: {exc.strerror or exc}",
                         source=str(path)) from None
    except (EOFError, zlib.error) as exc:  # a gzip file cut short or damaged
        raise InputError(f"cannot read workload: damaged gzip data ({exc})",
                         source=str(path)) from None
    except UnicodeDecodeError:
        read_text(path, "workload")  # raises, naming the byte and its line
        raise
    _check_not_empty(workload, str(path))
    return workload


def read_plain(path: Path, catalog: AppCatalog) -> SwfWorkload | None:
    """The workload of the SWF file at ``path`` (18 or 23 fields a line) read by
    :func:`~malleable.workloads.swf_plain.read_table` (vectorized), or None when that
    reader does not take the file in full (:func:`parse_swf` then reads it)."""
    from malleable.workloads.swf_plain import read_table  # numpy: only when a file is read

    trace = read_table(path, catalog, _LIMITS, header_line)
    jobs = _made(trace[0]) if trace is not None else None
    if trace is None or jobs is None:
        return None
    _warn_skipped(str(path), trace[1])
    return SwfWorkload(jobs, trace[1], trace[2], dict(sorted(trace[0].counts.items())))


def open_text(path: Path) -> TextIO:
    """The file at ``path`` as UTF-8 text, lines as they are, gunzipped when it starts
    with gzip's magic bytes."""
    with path.open("rb") as probe:
        magic = probe.read(2)
    if magic == b"\x1f\x8b":
        return gzip.open(path, "rt", encoding="utf-8", newline="")
    return path.open(encoding="utf-8", newline="")


def _made(table: JobTable) -> list[JobSpec] | None:
    """The jobs of ``table`` in file order, or None when ``JobSpec`` refuses one (its
    minimum above its initial size...: :func:`parse_swf` says which, on which line)."""
    jobs: list[JobSpec] = []
    try:
        for start in range(0, len(table), _MADE_AT_ONCE):  # the numbers' lists stay small
            jobs += table.batch(start, start + _MADE_AT_ONCE)
    except ValueError:
        return None
    return jobs


#: Jobs :func:`_made` asks a table for at a time (all at once, a 100k-job read's peak was
#: about 30 MiB higher: the rows as Python lists).
_MADE_AT_ONCE = 4096


def read_jobs(path: str | Path, catalog: AppCatalog | None = None
              ) -> list[JobSpec] | JobTable:
    """The jobs of :func:`read_trace`."""
    return read_trace(path, catalog).jobs


def read_trace(path: str | Path, catalog: AppCatalog | None = None) -> SwfTrace:
    """The jobs of :func:`read_swf` for a simulation, with the header and the counts: a
    plain file's as a :class:`~malleable.workloads.swf_plain.JobTable` in submit order
    (each job made when it is due), a malleable one's (23 fields) as a list made by the
    vectorized reader, any other file's as :func:`read_swf` gives them (its errors too).
    A gzipped file (``.swf.gz``) is read as the file it holds."""
    from malleable.workloads.swf_plain import read_table

    path = Path(path)
    catalog = catalog if catalog is not None else standard_catalog()
    try:
        trace = read_table(path, catalog, _LIMITS, header_line)
    except (OSError, EOFError, zlib.error):
        trace = None  # read_swf says what it is
    if trace is None or not len(trace[0]):  # no job: read_swf says why
        workload = read_swf(path, catalog)
        return SwfTrace(workload.jobs, workload.header, workload.skipped, workload.counts)
    table = trace[0]
    jobs = _made(table) if table.malleable else None
    if table.malleable and jobs is None:
        workload = read_swf(path, catalog)
        return SwfTrace(workload.jobs, workload.header, workload.skipped, workload.counts)
    _warn_skipped(str(path), trace[1])
    return SwfTrace(jobs if jobs is not None else table.in_submit_order(), trace[2],
                    trace[1], table.counts)


def _warn_skipped(source: str, skipped: int) -> None:
    if skipped:
        logger.warning("%s: skipped %d jobs with unknown run time or size", source, skipped)


def _check_not_empty(workload: SwfWorkload, source: str) -> None:
    if workload.jobs:
        return
    if workload.skipped:
        raise InputError(f"no jobs to simulate: all {workload.skipped} have an unknown (-1) "
                         "run time or size", source=source)
    raise InputError("no jobs: the file has only comments or blank lines", source=source)


def _lines(handle: Iterable[str]) -> Iterator[str]:
    """The file's lines as ``str.splitlines`` gives them, read one at a time (a million-job
    trace is never held whole: ~170 MiB less at the peak)."""
    for raw in handle:
        parts = raw.splitlines()
        if len(parts) == 1:
            yield parts[0]
        else:  # a form feed, vertical tab... inside the line: splitlines' other separators
            yield from parts


def parse_swf(lines: Iterable[str], source: str = "<swf>",
              catalog: AppCatalog | None = None) -> SwfWorkload:
    catalog = catalog if catalog is not None else standard_catalog()
    apps: dict[int, str] = {}
    workload = SwfWorkload([])
    seen: set[str] = set()
    floats = _Floats()
    for number, raw in enumerate(lines, start=1):
        line = raw.strip().lstrip("\ufeff") if number == 1 else raw.strip()
        if not line:
            continue
        if line.startswith(";"):
            workload.header.append(line)
            header_line(line, apps, catalog, source, number)
            continue
        spec = _parse_line(line, apps, catalog, source, number, floats, workload.counts)
        if spec is None:
            workload.skipped += 1
            continue
        if spec.id in seen:
            raise InputError(f"job number {spec.id} appears twice", source=source, line=number)
        seen.add(spec.id)
        workload.jobs.append(spec)
    workload.counts = dict(sorted(workload.counts.items()))  # as read_plain orders them
    _warn_skipped(source, workload.skipped)
    return workload


def header_line(line: str, apps: dict[int, str], catalog: AppCatalog, source: str,
                 number: int) -> None:
    """Take in a ``; MalleableApp: N NAME`` line (NAME checked against ``catalog`` here,
    even if no job uses it); check ``; MalleableFormat: V``."""
    version = _FORMAT_LINE.match(line)
    if version and version.group(1) not in FORMAT_VERSIONS:
        raise InputError(f"MalleableFormat {version.group(1)!r} is not a version this "
                         f"reader knows ({', '.join(FORMAT_VERSIONS)})", source=source,
                         line=number)
    if not _APP_TAG.match(line):
        return
    match = _APP_LINE.match(line)
    if not match:
        raise InputError("expected '; MalleableApp: N NAME' (N a whole number >= 0)",
                         source=source, line=number)
    code, name = int(match.group(1)), match.group(2)
    if code > MAX_NUMBER:
        raise InputError(f"application number {code} is above {MAX_NUMBER}", source=source,
                         line=number)
    if code in apps:
        raise InputError(f"application number {code} is named twice (first {apps[code]!r})",
                         source=source, line=number)
    problem = catalog.problem(name)
    if problem:
        raise InputError(problem, source=source, line=number)
    apps[code] = name


def _limits(bounds: tuple[Bound, ...]) -> tuple[tuple[int, int, int, bool, bool], ...]:
    return tuple((b.field - 1, b.low, b.high, b.whole, b.unknown) for b in bounds)


# the bounds as plain tuples, by number of fields, for the check of every line
_LIMITS = {18: _limits(BOUNDS), 23: _limits(BOUNDS + MALLEABLE_BOUNDS)}


def _check_bounds(fields: Sequence[str], values: Sequence[float], source: str,
                  number: int) -> None:
    """InputError for the first used field outside its :class:`Bound`.

    :meth:`Bound.problem`'s test, inlined over plain tuples (no method call per field; 7%
    fewer instructions to read a trace): a value passes when it lies in [low, high] (and is
    whole where it must be) or is -1 where unknown is allowed. A line with a value that
    fails goes to :func:`_refuse_bounds`, which asks :meth:`Bound.problem` for the message.
    """
    for index, low, high, whole, unknown in _LIMITS[len(values)]:
        value = values[index]
        if (low <= value <= high and (not whole or value.is_integer())) or (
                unknown and value == -1):
            continue
        _refuse_bounds(fields, values, source, number)


def _refuse_bounds(fields: Sequence[str], values: Sequence[float], source: str,
                   number: int) -> None:
    """InputError naming the first used field outside its :class:`Bound`."""
    bounds = BOUNDS + MALLEABLE_BOUNDS if len(values) == 23 else BOUNDS
    for bound in bounds:
        problem = bound.problem(fields[bound.field - 1], values[bound.field - 1])
        if problem:
            raise InputError(problem, source=source, line=number)


def _check_size_rule(app: str, size: int, catalog: AppCatalog, source: str,
                     number: int) -> SizeRule:
    """The application's size rule, when the initial size is one it runs on (FT: a power
    of two)."""
    rule = catalog.rule(app)
    if rule.largest_fit(size) != size:
        raise InputError(f"application {app} runs on {rule.value} sizes only: initial size "
                         f"{size} is not one", source=source, line=number)
    return rule


def _numbers(line: str, source: str, number: int, floats: _Floats | None = None
             ) -> list[float]:
    fields = line.split()
    if len(fields) == 18 or len(fields) == 23:
        values = _plain_numbers(fields, floats if floats is not None else _Floats())
        if values is not None:
            _check_bounds(fields, values, source, number)  # the same bounds on both paths
            return values
    if len(fields) not in (18, 23):
        raise InputError(f"expected 18 SWF fields (or 23 with the malleable ones), found "
                         f"{len(fields)}", source=source, line=number)
    try:
        values = [float(f) for f in fields]
    except ValueError:
        bad = next(f for f in fields if not _is_number(f))
        raise InputError(f"field {fields.index(bad) + 1} is not a number: {bad!r}",
                         source=source, line=number) from None
    for index, value in enumerate(values):
        if not math.isfinite(value):
            raise InputError(f"field {index + 1} is not a finite number: {fields[index]!r}",
                             source=source, line=number)
    _check_bounds(fields, values, source, number)
    return values


#: The most tokens a :class:`_Floats` remembers before it starts afresh.
FLOATS_KEPT = 1 << 16


class _Floats(dict[str, float]):
    """``float(token)``, remembered for one read: a trace repeats few tokens (``-1``, the
    sizes, run times, user numbers), and a dict lookup costs a tenth of a ``float`` parse
    (the numbers of a plain 18-field line: 3.6 -> 1.8 us on gen_swf.py's trace). ``float``
    is a pure function, so a remembered value is the value ``float`` gives; a token it
    refuses raises its ValueError and is not remembered. At most :data:`FLOATS_KEPT`
    tokens: when full, it is emptied and fills again with the tokens still in use."""

    __slots__ = ()

    def __missing__(self, token: str) -> float:
        value = float(token)
        if len(self) >= FLOATS_KEPT:
            self.clear()
        self[token] = value
        return value


def _plain_numbers(fields: list[str], floats: _Floats) -> list[float] | None:
    """The lean path: a line's fields as numbers when every one is a finite number, else
    None (the general path in :func:`_numbers` then finds the field and says what is wrong).

    One pass through ``floats`` (``float``, remembered; not for the job number and the
    submit time, which are each line's own) and one sum replace eighteen ``float`` and
    ``isfinite`` calls: an infinite or NaN field makes the sum so; a finite sum that
    overflows is left to the general path.
    """
    try:
        values = [float(fields[0]), float(fields[1]), *map(floats.__getitem__, fields[2:])]
    except ValueError:
        return None
    total = sum(values)
    if total - total != 0.0:  # inf or nan
        return None
    return values


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _parse_line(line: str, apps: dict[int, str], catalog: AppCatalog, source: str,
                number: int, floats: _Floats | None = None,
                counts: dict[str, int] | None = None) -> JobSpec | None:
    f = _numbers(line, source, number, floats)
    job_id, submit, runtime = int(f[0]), f[1], f[3]
    size = int(f[7]) if f[7] > 0 else int(f[4])
    kind, low, high, preferred, app = JobKind.RIGID, size, size, None, "fixed"
    if len(f) == 23:
        code = int(f[18])
        if code not in _KINDS or not f[18].is_integer():
            raise InputError(f"job kind {code} is not -1, 0, 1 or 2", source=source, line=number)
        kind = _KINDS[code]
        low = int(f[19]) if f[19] > 0 else size
        high = int(f[20]) if f[20] > 0 else size
        preferred = int(f[21]) if f[21] > 0 else None
        app = _app_name(int(f[22]), apps, catalog, source, number)
    if app == "fixed" and runtime < 0:
        return None
    if size <= 0:
        return None
    rule = _check_size_rule(app, size, catalog, source, number)
    if counts is not None:  # a kept job: its status and where its size came from
        name = STATUS_NAMES.get(int(f[10]), "status_other") if f[10].is_integer() \
            else "status_other"
        counts[name] = counts.get(name, 0) + 1
        if f[7] <= 0:
            counts["size_from_allocated"] = counts.get("size_from_allocated", 0) + 1
    try:
        return JobSpec(str(job_id), kind, low, high, size, submit_time=submit, app=app,
                       runtime=runtime if runtime >= 0 else None, preferred_size=preferred,
                       size_rule=rule,
                       walltime=f[8] if f[8] > 0 else None,
                       user=str(int(f[11])) if f[11] >= 0 else "",
                       group=str(int(f[12])) if f[12] >= 0 else "")
    except ValueError as exc:
        message = str(exc).split(": ", 1)[-1]
        raise InputError(message, source=source, line=number) from None


def _app_name(code: int, apps: dict[int, str], catalog: AppCatalog, source: str,
              number: int) -> str:
    if code < 0:
        return "fixed"
    name = apps.get(code)
    if name is None:
        raise InputError(f"application number {code} has no '; MalleableApp: {code} NAME' "
                         "header line", source=source, line=number)
    problem = catalog.problem(name)
    if problem:
        raise InputError(problem, source=source, line=number)
    return name


def write_swf(path: str | Path, jobs: Sequence[JobSpec], comment: str = "") -> None:
    """Write ``jobs`` as a malleable SWF file (23 fields a line)."""
    names = sorted({j.app for j in jobs if j.app != "fixed"})
    codes = {name: i + 1 for i, name in enumerate(names)}
    lines = ["; Version: 2.2", "; MalleableFormat: 1"]
    if comment:
        lines.append(f"; Note: {comment}")
    lines += [f"; MalleableApp: {codes[n]} {n}" for n in names]
    for i, spec in enumerate(jobs, start=1):
        lines.append(" ".join(_fields(spec, i, codes)))
    Path(path).write_text("\n".join(lines) + "\n", encoding="utf-8")


def _fields(spec: JobSpec, index: int, codes: dict[str, int]) -> list[str]:
    job_id = spec.id if spec.id.isdigit() else str(index)
    runtime = f"{spec.runtime:g}" if spec.runtime is not None else "-1"
    walltime = f"{spec.walltime:g}" if spec.walltime is not None else "-1"
    user = spec.user if spec.user.isdigit() else "-1"
    group = spec.group if spec.group.isdigit() else "-1"
    base = [job_id, f"{spec.submit_time:g}", "-1", runtime, str(spec.initial_size), "-1", "-1",
            str(spec.initial_size), walltime, "-1", "-1", user, group, "-1", "-1", "-1", "-1",
            "-1"]
    extra = [str(_KIND_CODES[spec.kind]), str(spec.min_size), str(spec.max_size),
             str(spec.preferred_size) if spec.preferred_size is not None else "-1",
             str(codes.get(spec.app, -1))]
    return base + extra
