"""The vectorized reader of plain SWF files (18 fields a line), for :func:`read_swf`.

A trace from the Parallel Workloads Archive or a generator is a few header lines and
then up to millions of lines of 18 numbers. This reader takes such a file in blocks of
lines, parses each block's numbers at once with :func:`numpy.loadtxt`, and runs every
check of docs/workloads.md on whole columns. It gives the same :class:`SwfWorkload` as
:func:`parse_swf` (the same jobs, in the same order, field for field; the same header,
skipped count and warning), or ``None`` when it cannot vouch for that:

* a byte outside ASCII, or a character that ``str.splitlines`` or ``str.split`` treats
  differently from a plain ``\\n`` or blank (``\\r`` outside ``\\r\\n``, ``\\v``, ``\\f``,
  ``\\x1c``-``\\x1f``);
* a data line with a character other than ``0-9 + - . e E``, blank or tab (``inf``,
  ``nan``, ``1_000``, ``0x10`` are then left to ``float``);
* a line of another length than 18 fields (the malleable extension's 23 included), a
  token :func:`numpy.loadtxt` refuses, a value outside its :class:`Bound`, a job number
  that appears twice, or a header line :func:`parse_swf` refuses.

``None`` sends the caller back to :func:`parse_swf` for the whole file: any file this
reader does not take in full is read line by line, so every error keeps its message and
line number. Numbers are parsed as ``float`` parses them: both round correctly, and
whole-number blocks without ``-0`` are parsed as 64-bit integers, exact within the
bounds.
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO, cast

import numpy as np
import numpy.typing as npt

from malleable.apps import AppCatalog
from malleable.errors import InputError
from malleable.model import JobKind, JobSpec, SizeRule
from malleable.workloads.swf import BOUNDS, SwfWorkload, header_line, logger

BLOCK_BYTES = 1 << 22
"""Bytes read at a time (a block ends at a line end): at 1M jobs, the text and the
numbers of a block are a few MiB, not the whole file's ~60 + ~140 MiB."""

_FIELDS = 18
_UNSAFE = b"\r\x0b\x0c\x1c\x1d\x1e\x1f"  # after \r\n -> \n
_HEADER = re.compile(rb"^[ \t]*;.*$", re.MULTILINE)
_NUMBER_BYTES = b"0123456789+-.eE \t\n"
_WHOLE_BYTES = b"0123456789- \t\n"

Floats = npt.NDArray[np.float64]


class _NotPlain(Exception):
    """The file is not one this reader vouches for: read it line by line."""


def read_plain(path: Path, catalog: AppCatalog) -> SwfWorkload | None:
    """The workload of the plain SWF file at ``path``, or None (see the module)."""
    workload = SwfWorkload([])
    apps: dict[int, str] = {}
    ids: list[npt.NDArray[np.int64]] = []
    try:
        with path.open("rb") as handle:
            for first, block in _blocks(handle):
                ids.append(_take_block(block, first, workload, apps, catalog, str(path)))
    except _NotPlain:
        return None
    if ids:
        every = np.concatenate(ids)
        if np.unique(every).size != every.size:
            return None
    if workload.skipped:
        logger.warning("%s: skipped %d jobs with unknown run time or size", str(path),
                       workload.skipped)
    return workload


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


def _take_block(block: bytes, first: int, workload: SwfWorkload, apps: dict[int, str],
                catalog: AppCatalog, source: str) -> npt.NDArray[np.int64]:
    """Add the jobs of ``block`` (its first line is line ``first``) to ``workload``; the
    numbers of the jobs taken."""
    data = block
    if b";" in block:
        data = _take_header(block, first, workload, apps, catalog, source)
    values = _numbers(data)
    if values is None:
        return np.empty(0, dtype=np.int64)
    _check(values)
    return _add_jobs(values, workload)


def _take_header(block: bytes, first: int, workload: SwfWorkload, apps: dict[int, str],
                 catalog: AppCatalog, source: str) -> bytes:
    """The data lines of ``block``; its ``;`` lines checked and kept as parse_swf does."""
    number, counted = first, 0
    for match in _HEADER.finditer(block):
        number += block.count(b"\n", counted, match.start())
        counted = match.start()
        line = match.group().decode("ascii").strip()
        workload.header.append(line)
        try:
            header_line(line, apps, catalog, source, number)
        except InputError:  # parse_swf reports it, after any error on an earlier line
            raise _NotPlain from None
    return _HEADER.sub(b"", block)


def _numbers(data: bytes) -> Floats | None:
    """The block's numbers, one row a line (None: no data line)."""
    if not data.strip():
        return None
    if data.translate(None, _NUMBER_BYTES):
        raise _NotPlain
    whole = not data.translate(None, _WHOLE_BYTES) and b"-0" not in data  # -0.0 is a float
    try:
        values = np.loadtxt(io.BytesIO(data), dtype=np.int64 if whole else np.float64,
                            comments=None, ndmin=2)
    except ValueError:
        raise _NotPlain from None
    if values.shape[1] != _FIELDS:
        raise _NotPlain
    return values.astype(np.float64, copy=False)


def _check(values: Floats) -> None:
    """_NotPlain unless every number is finite and every used field within its bound."""
    if not np.isfinite(values).all():
        raise _NotPlain
    for bound in BOUNDS:
        column = values[:, bound.field - 1]
        ok = (column >= bound.low) & (column <= bound.high)
        if bound.whole:
            ok &= column == np.floor(column)
        if bound.unknown:
            ok |= column == -1
        if not ok.all():
            raise _NotPlain


def _add_jobs(values: Floats, workload: SwfWorkload) -> npt.NDArray[np.int64]:
    """Append the rigid ``fixed`` jobs of ``values`` as :func:`parse_swf` makes them (a
    job with an unknown run time or size is counted as skipped); their numbers.

    ``fixed`` takes any size (:class:`AppCatalog` reserves the name). The arguments are
    positional, in the order of :class:`JobSpec`'s fields (a third faster than by
    keyword); ``JobSpec`` still checks each job."""
    size = np.where(values[:, 7] > 0, values[:, 7], values[:, 4])
    keep = (values[:, 3] >= 0) & (size > 0)
    workload.skipped += int(keep.size - np.count_nonzero(keep))
    rows = values[keep]
    numbers = rows[:, 0].astype(np.int64)
    rigid, anything, jobs = JobKind.RIGID, SizeRule.ANY, workload.jobs
    for number, submit, runtime, n, walltime, user, group in zip(
            numbers.tolist(), rows[:, 1].tolist(), rows[:, 3].tolist(),
            size[keep].astype(np.int64).tolist(), rows[:, 8].tolist(), _names(rows[:, 11]),
            _names(rows[:, 12]), strict=True):
        jobs.append(JobSpec(str(number), rigid, n, n, n, submit, "fixed", runtime, None,
                            anything, walltime if walltime > 0 else None, user, group))
    return numbers


def _names(column: Floats) -> list[str]:
    """A user or group column as parse_swf writes it: the number, or "" for -1."""
    numbers, where = np.unique(column.astype(np.int64), return_inverse=True)
    names = np.array([str(n) if n >= 0 else "" for n in numbers.tolist()], dtype=object)
    return cast(list[str], names[where].tolist())
