"""The vectorized reader of SWF files whose lines all have 18 fields (plain) or all 23
(the malleable extension), for :func:`~malleable.workloads.swf.read_swf` and
:func:`~malleable.workloads.swf.read_jobs`.

A trace from the Parallel Workloads Archive or a generator is a few header lines and
then up to millions of lines of 18 (or 23) numbers. This reader takes such a file in
blocks of lines, parses each block's numbers at once with :func:`numpy.loadtxt`, and
runs every check of docs/workloads.md on whole columns. :func:`read_table` gives what
:func:`parse_swf` gives (the same jobs, in the same order, field for field; the same header
and skipped count), or ``None`` when it cannot vouch for that:

* a byte outside ASCII, or a character that ``str.splitlines`` or ``str.split`` treats
  differently from a plain ``\\n`` or blank (``\\r`` outside ``\\r\\n``, ``\\v``, ``\\f``,
  ``\\x1c``-``\\x1f``);
* a data line with a character other than ``0-9 + - . e E``, blank or tab (``inf``,
  ``nan``, ``1_000``, ``0x10`` are then left to ``float``);
* a line of another length than 18 or 23 fields, or of another length than the file's
  first data line, a token :func:`numpy.loadtxt` refuses, a value outside its
  :class:`Bound`, a job number that appears twice, or a header line :func:`parse_swf`
  refuses;
* on 23-field lines: a job kind other than -1, 0, 1, 2, an application number no
  ``; MalleableApp`` line has named, a ``; MalleableApp`` line after a data line (the line
  reader knows a name only from its line on), an initial size the application does not
  run on (FT: a power of two), or a job :class:`JobSpec` refuses (made by
  :meth:`JobTable.batch`, which raises ValueError: the caller then reads line by line).

``None`` sends the caller back to :func:`parse_swf` for the whole file: any file this
reader does not take in full is read line by line, so every error keeps its message and
line number. Numbers are parsed as ``float`` parses them: both round correctly, and
whole-number blocks without ``-0`` are parsed as 64-bit integers, exact within the
bounds.
"""

from __future__ import annotations

import gzip
import io
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO, cast

import numpy as np

from malleable.apps import AppCatalog
from malleable.errors import InputError
from malleable.model import JobKind, JobSpec, SizeRule
from malleable.workloads.swf_status import STATUS_NAMES

if TYPE_CHECKING:
    import numpy.typing as npt

    Floats = npt.NDArray[np.float64]

#: :func:`malleable.workloads.swf.header_line`: (line, apps, catalog, source, number).
HeaderCheck = Callable[[str, dict[int, str], AppCatalog, str, int], None]
#: A field's bound as :mod:`~malleable.workloads.swf` lists them: (index from 0, low, high,
#: whole numbers only, -1 allowed).
Limit = tuple[int, int, int, bool, bool]

BLOCK_BYTES = 1 << 18
"""Bytes read at a time (a block ends at a line end). 4 MiB blocks raised the peak of a
100k-job read by 22 MiB over 256 KiB ones and were no faster."""

#: The fields a job is made of, as the columns of a :class:`JobTable`: number, submit
#: time, run time, size (field 8, or 5 when 8 is -1: set by the reader), wall time, user,
#: group; on 23-field lines also kind, minimum, maximum, preferred size, application;
#: last, the wait and the allocated size (for :meth:`JobTable.log_fields`).
_COLUMNS = {18: [0, 1, 3, 7, 8, 11, 12, 2, 4],
            23: [0, 1, 3, 7, 8, 11, 12, 18, 19, 20, 21, 22, 2, 4]}
_KINDS = {-1: JobKind.RIGID, 0: JobKind.RIGID, 1: JobKind.MOLDABLE, 2: JobKind.MALLEABLE}
_UNSAFE = b"\r\x0b\x0c\x1c\x1d\x1e\x1f"  # after \r\n -> \n
_HEADER = re.compile(rb"^[ \t]*;.*$", re.MULTILINE)
_NUMBER_BYTES = b"0123456789+-.eE \t\n"
_WHOLE_BYTES = b"0123456789- \t\n"
_NOT_WHOLE = tuple(bytes([c]) for c in _NUMBER_BYTES if c not in _WHOLE_BYTES)  # + . e E


class _NotPlain(Exception):
    """The file is not one this reader vouches for: read it line by line."""


def read_table(path: Path, catalog: AppCatalog, bounds: Mapping[int, Sequence[Limit]],
               header: HeaderCheck) -> tuple[JobTable, int, list[str]] | None:
    """The jobs of the SWF file at ``path`` as a :class:`JobTable` in file order, the
    number of jobs skipped and the header lines, or None (see the module).

    ``bounds`` (the field bounds of 18- and of 23-field lines) and ``header`` are
    :mod:`~malleable.workloads.swf`'s (passed in: that module imports this one)."""
    state = _State(catalog, str(path), {n: tuple(b) for n, b in bounds.items()}, header)
    rows: list[Floats] = []
    try:
        with open_binary(path) as handle:
            for first, block in _blocks(handle):
                taken = _take_block(block, first, state)
                if taken is not None:
                    rows.append(taken)
    except _NotPlain:
        return None
    if state.late_apps and state.width == 23:
        return None
    width = len(_COLUMNS[state.width or 18])
    table = JobTable(np.concatenate(rows) if rows else np.empty((0, width)),
                     _apps(state) if state.width == 23 else None, state.counts)
    if not table.unique():
        return None
    return table, state.skipped, state.header


def open_binary(path: Path) -> BinaryIO:
    """The file at ``path`` for reading bytes, gunzipped when it starts with gzip's magic
    bytes (a ``.swf.gz`` as the Parallel Workloads Archive distributes it; the name does
    not matter)."""
    with path.open("rb") as probe:
        magic = probe.read(2)
    if magic == b"\x1f\x8b":
        return cast(BinaryIO, gzip.open(path, "rb"))
    return path.open("rb")


def _distinct(values: npt.NDArray[np.generic]) -> npt.NDArray[np.generic]:
    """The distinct values, sorted, flattened: :func:`numpy.unique` without its import of
    numpy.ma at its first call (7 ms, a plain file's read needs none of it)."""
    ordered = np.sort(values, axis=None)
    if ordered.size < 2:
        return ordered
    first = np.empty(ordered.size, dtype=bool)
    first[0] = True
    np.not_equal(ordered[1:], ordered[:-1], out=first[1:])
    return ordered[first]


def _apps(state: _State) -> dict[int, tuple[str, SizeRule]]:
    """The application of each number of field 23 (-1: ``fixed``), with its size rule."""
    names = {-1: "fixed", **state.apps}
    return {code: (name, state.catalog.rule(name)) for code, name in names.items()}


@dataclass
class _State:
    """What a read carries from block to block."""

    catalog: AppCatalog
    source: str
    bounds: dict[int, tuple[Limit, ...]]
    check_header: HeaderCheck
    apps: dict[int, str] = field(default_factory=dict)
    header: list[str] = field(default_factory=list)
    skipped: int = 0
    width: int = 0  # the fields of every data line (0: no data line yet)
    data_seen: bool = False
    late_apps: bool = False  # a ; MalleableApp line came after a data line
    #: the kept jobs by status (field 11: ``status_completed``...) and those whose size is
    #: field 5's (field 8 is -1): :data:`~malleable.workloads.swf_log.STATUS_NAMES`
    counts: dict[str, int] = field(default_factory=dict)


class JobTable:
    """The jobs of a file, checked (by the reader), held as a compact array of numbers;
    each :class:`JobSpec` is made when :meth:`batch` is asked for it, as
    :func:`~malleable.workloads.swf.parse_swf` makes it, field for field.

    A plain file's jobs are rigid ``fixed`` ones (72 bytes a job, not a ``JobSpec``'s
    ~300), which :func:`~malleable.sim.run.check_jobs` would find nothing wrong with: a
    simulation takes them from :meth:`in_submit_order`'s table a batch at a time
    (:class:`~malleable.sim.run.JobBatches`), so only the jobs due soon exist as objects.
    A malleable file's table (:attr:`malleable`: 23-field lines, ``apps`` the application
    and size rule of each number of field 23) makes any kind of job; ``JobSpec`` may
    refuse one of them (ValueError), so its jobs are made at once, by the reader's caller.
    """

    __slots__ = ("_apps", "_names", "_rows", "counts")

    def __init__(self, rows: Floats, apps: Mapping[int, tuple[str, SizeRule]] | None = None,
                 counts: Mapping[str, int] | None = None) -> None:
        self._rows = rows  # one row a job: the columns of _COLUMNS
        self._apps = apps
        #: what the reader counted of the kept jobs (status codes...; see _State.counts)
        self.counts: dict[str, int] = dict(counts or {})
        codes = _distinct(rows[:, 5:7].astype(np.int64)).tolist()
        self._names = {code: str(code) if code >= 0 else "" for code in codes}

    @property
    def malleable(self) -> bool:
        """Whether the jobs come from 23-field lines (any kind, any application)."""
        return self._apps is not None

    def __len__(self) -> int:
        return len(self._rows)

    def unique(self) -> bool:
        """Whether no job number appears twice."""
        numbers = self._rows[:, 0]
        return bool(_distinct(numbers).size == numbers.size)

    def in_submit_order(self) -> JobTable:
        """The same jobs sorted by submit time, the file's order kept among equal times
        (as ``sorted`` does)."""
        order = np.argsort(self._rows[:, 1], kind="stable")
        return JobTable(self._rows[order], self._apps, self.counts)

    def as_log(self, shift: float, per_node: int) -> JobTable:
        """The same jobs with every submit time less ``shift`` and each size in processors
        made whole nodes of ``per_node`` processors (rounded up); the table's counts with
        those of :func:`~malleable.workloads.swf_log.oddities` (rigid tables only)."""
        rows = self._rows.copy()
        rows[:, 1] -= shift
        sizes = rows[:, 3]
        rounded = int(np.count_nonzero(sizes % per_node)) if per_node > 1 else 0
        if per_node > 1:
            rows[:, 3] = np.ceil(sizes / per_node)
        runtime, walltime = rows[:, 2], rows[:, 4]
        counts = {**self.counts,
                  "runtime_zero": int(np.count_nonzero(runtime == 0)),
                  "walltime_missing": int(np.count_nonzero(walltime <= 0)),
                  "walltime_below_runtime": int(np.count_nonzero((walltime > 0)
                                                                 & (walltime < runtime))),
                  "rounded_up_to_nodes": rounded}
        return JobTable(rows, self._apps, counts)

    def log_fields(self) -> Floats:
        """One row a job, for studies of a real log (:mod:`~malleable.workloads.reallog`):
        submit time, wait (field 3, as logged), run time, size (field 8, or 5 when 8 is
        -1), allocated size (field 5, as logged), requested time."""
        return self._rows[:, (1, -2, 2, 3, -1, 4)]

    @property
    def first_submit(self) -> float:
        """The first job's submit time (0.0 without jobs)."""
        return float(self._rows[0, 1]) if len(self._rows) else 0.0

    def batch(self, start: int, stop: int) -> list[JobSpec]:
        """The jobs ``start`` to ``stop`` (excluded) as :class:`JobSpec` values.

        ``fixed`` takes any size (:class:`AppCatalog` reserves the name). The arguments
        are positional, in the order of :class:`JobSpec`'s fields (a third faster than by
        keyword); ``JobSpec`` still checks each job (ValueError)."""
        if self._apps is not None:
            return self._malleable_batch(self._rows[start:stop], self._apps)
        part = self._rows[start:stop]
        whole = part[:, (0, 3, 5, 6)].astype(np.int64)
        rigid, anything, names = JobKind.RIGID, SizeRule.ANY, self._names
        return [JobSpec(str(number), rigid, n, n, n, submit, "fixed", runtime, None, anything,
                        walltime if walltime > 0 else None, names[user], names[group])
                for (number, n, user, group), submit, runtime, walltime in zip(
                    whole.tolist(), part[:, 1].tolist(), part[:, 2].tolist(),
                    part[:, 4].tolist(), strict=True)]


    def _malleable_batch(self, part: Floats, apps: Mapping[int, tuple[str, SizeRule]]
                         ) -> list[JobSpec]:
        """The jobs of 23-field rows, as :func:`~malleable.workloads.swf._parse_line`
        makes them: a minimum or maximum of -1 is the initial size, a preferred size of -1
        none, a run time of -1 none."""
        whole = part[:, (0, 3, 5, 6, 7, 8, 9, 10, 11)].astype(np.int64)
        kinds, names = _KINDS, self._names
        jobs = []
        for (number, n, user, group, kind, low, high, preferred, code), submit, runtime, \
                walltime in zip(whole.tolist(), part[:, 1].tolist(), part[:, 2].tolist(),
                                part[:, 4].tolist(), strict=True):
            app, rule = apps[code]
            jobs.append(JobSpec(str(number), kinds[kind], low if low > 0 else n,
                                high if high > 0 else n, n, submit, app,
                                runtime if runtime >= 0 else None,
                                preferred if preferred > 0 else None, rule,
                                walltime if walltime > 0 else None, names[user], names[group]))
        return jobs


def _blocks(handle: BinaryIO) -> Iterator[tuple[int, bytes]]:
    """The file in blocks of whole lines, ``\\r\\n`` made ``\\n``, each with the number of
    its first line; _NotPlain for a byte this reader does not vouch for."""
    line, rest = 1, b""
    while True:
        chunk = handle.read(BLOCK_BYTES)
        block = rest + chunk
        if chunk:
            end = block.rfind(b"\n") + 1
            block, rest = block[:end], block[end:]
        if block:
            block = block.replace(b"\r\n", b"\n")
            if not block.isascii() or len(block.translate(None, _UNSAFE)) != len(block):
                raise _NotPlain
            yield line, block
            line += block.count(b"\n")
        if not chunk:
            return


def _take_block(block: bytes, first: int, state: _State) -> Floats | None:
    """The rows (:data:`_COLUMNS`) of the jobs of ``block``, its first line ``first``
    (None: it has no data line); its header lines and skipped jobs counted in ``state``."""
    data = block
    if b";" in block:
        data = _take_header(block, first, state)
    values = _numbers(data)
    if values is None:
        return None
    width = values.shape[1]
    if state.width not in (0, width) or width not in state.bounds:
        raise _NotPlain
    state.width, state.data_seen = width, True
    _check(values, state.bounds[width])
    size = np.where(values[:, 7] > 0, values[:, 7], values[:, 4])
    known = values[:, 3] >= 0  # a run time; or on 23 fields an application that is not fixed
    if width == 23:
        _check_kinds_and_apps(values, state.apps)
        fixed = [-1, *(code for code, name in state.apps.items() if name == "fixed")]
        known |= ~np.isin(values[:, 22], fixed)
    keep = known & (size > 0)  # else skipped, as parse_swf skips them
    state.skipped += int(keep.size - np.count_nonzero(keep))
    _count(values[keep], state.counts)
    rows = values[:, _COLUMNS[width]][keep]
    rows[:, 3] = size[keep]
    if width == 23:
        _check_sizes(rows, state)
    return rows


def _count(kept: Floats, counts: dict[str, int]) -> None:
    """Add the kept jobs of a block to ``counts``: by status (field 11; any value the
    archive does not define is ``status_other``) and those sized by field 5."""
    status = kept[:, 10]
    named = 0
    for code, name in STATUS_NAMES.items():
        found = int(np.count_nonzero(status == code))
        named += found
        if found:
            counts[name] = counts.get(name, 0) + found
    if len(status) > named:
        counts["status_other"] = counts.get("status_other", 0) + len(status) - named
    allocated = int(np.count_nonzero(kept[:, 7] <= 0))
    if allocated:
        counts["size_from_allocated"] = counts.get("size_from_allocated", 0) + allocated


def _check_kinds_and_apps(values: Floats, apps: Mapping[int, str]) -> None:
    """_NotPlain unless every job kind (field 19) is -1, 0, 1 or 2 and every application
    number (field 23, whole by its bound) is -1 or named by a header line."""
    if not np.isin(values[:, 18], (-1, 0, 1, 2)).all():
        raise _NotPlain
    codes = np.unique(values[:, 22]).astype(np.int64).tolist()
    if any(code >= 0 and code not in apps for code in codes):
        raise _NotPlain


def _check_sizes(rows: Floats, state: _State) -> None:
    """_NotPlain unless each kept job's initial size is one its application runs on."""
    for code in np.unique(rows[:, 11]).astype(np.int64).tolist():
        rule = state.catalog.rule(state.apps[code] if code >= 0 else "fixed")
        sizes = np.unique(rows[rows[:, 11] == code, 3]).astype(np.int64).tolist()
        if any(rule.largest_fit(size) != size for size in sizes):
            raise _NotPlain


def _take_header(block: bytes, first: int, state: _State) -> bytes:
    """The data lines of ``block``; its ``;`` lines checked and kept as parse_swf does."""
    number, counted, end = first, 0, 0
    for match in _HEADER.finditer(block):
        number += block.count(b"\n", counted, match.start())
        counted = match.start()
        state.data_seen = state.data_seen or bool(block[end:match.start()].strip())
        end = match.end()
        line = match.group().decode("ascii").strip()
        state.header.append(line)
        named = len(state.apps)
        try:
            state.check_header(line, state.apps, state.catalog, state.source, number)
        except InputError:  # parse_swf reports it, after any error on an earlier line
            raise _NotPlain from None
        state.late_apps = state.late_apps or (state.data_seen and len(state.apps) > named)
    return _HEADER.sub(b"", block)


def _numbers(data: bytes) -> Floats | None:
    """The block's numbers, one row a line (None: no data line)."""
    if not data.strip():
        return None
    if data.translate(None, _NUMBER_BYTES):
        raise _NotPlain
    # whole numbers only: no byte of _NUMBER_BYTES outside _WHOLE_BYTES (four quick
    # searches, not a second pass of translate), and no -0 (-0.0 is a float)
    whole = not any(byte in data for byte in _NOT_WHOLE) and b"-0" not in data
    try:
        values = np.loadtxt(io.BytesIO(data), dtype=np.int64 if whole else np.float64,
                            comments=None, ndmin=2)
    except ValueError:
        raise _NotPlain from None
    return values.astype(np.float64, copy=False)


def _check(values: Floats, bounds: tuple[Limit, ...]) -> None:
    """_NotPlain unless every number is finite and every used field within its bound."""
    if not np.isfinite(values).all():
        raise _NotPlain
    for index, low, high, whole, unknown in bounds:
        column = values[:, index]
        ok = (column >= low) & (column <= high)
        if whole:
            ok &= column == np.floor(column)
        if unknown:
            ok |= column == -1
        if not ok.all():
            raise _NotPlain
