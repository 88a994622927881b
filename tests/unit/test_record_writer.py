"""jobs.csv's rows as RecordWriter writes them (a line made by hand when no field needs
quotes) are those csv.writer writes for the same cells, byte for byte."""

from __future__ import annotations

import csv
import io
import math
import random

import pytest

from malleable.metrics.records import JobRecord
from malleable.metrics.summary import RECORD_COLUMNS, RecordWriter, csv_cell
from malleable.model import JobKind, JobSpec, JobState


def by_csv(record: JobRecord, grows: int, shrinks: int) -> str:
    """The row as the csv module writes it (the writer before the hand-made line)."""
    out = io.StringIO()
    spec = record.spec
    csv.writer(out).writerow((
        spec.id, spec.kind.value, spec.app, record.cluster, record.state.value,
        csv_cell(spec.submit_time), csv_cell(record.start), csv_cell(record.end),
        csv_cell(record.wait), csv_cell(record.execution), csv_cell(record.response),
        csv_cell(record.avg_size), record.max_size, spec.min_size, spec.max_size,
        spec.initial_size, grows + shrinks, grows, shrinks))
    return out.getvalue()


def written(record: JobRecord, grows: int = 0, shrinks: int = 0) -> str:
    out = io.StringIO()
    writer = RecordWriter(out)
    writer.add(record, grows, shrinks)
    header, _, row = out.getvalue().partition("\r\n")
    assert header == ",".join(RECORD_COLUMNS)
    return row


def record(job_id: str = "7", app: str = "fixed", cluster: str = "c", submit: float = 3.0,
           start: float | None = 10.0, end: float | None = 20.5,
           state: JobState = JobState.COMPLETED, kind: JobKind = JobKind.MALLEABLE,
           sizes: tuple[tuple[float, int], ...] = ((10.0, 2),)) -> JobRecord:
    spec = JobSpec(job_id, kind, 1, 8, 2, submit, app=app, runtime=5.0)
    rec = JobRecord(spec)
    if start is not None:
        rec.place(start, cluster)
        for time, size in sizes:
            rec.resize(time, size)
    if end is not None:
        rec.finish(end, state)
    return rec


@pytest.mark.parametrize("job_id", ["7", "job-1", "a,b", 'say "x"', "line\nend", "cr\rx", ""])
@pytest.mark.parametrize("cluster", ["c", "fs0,fs1", ""])
def test_quoted_fields_are_written_as_csv_writes_them(job_id: str, cluster: str) -> None:
    rec = record(job_id, app="amdahl:0.9", cluster=cluster)
    assert written(rec, 1, 2) == by_csv(rec, 1, 2)


def test_times_none_nan_negative_zero_and_long_floats_as_csv_writes_them() -> None:
    rnd = random.Random(3)
    cases = [record(start=None, end=None, state=JobState.WAITING),  # never started
             record(start=None, end=4.0, state=JobState.FAILED),  # rejected
             record(submit=-0.0, start=-0.0, end=0.0),  # "-0.0" is never written
             record(submit=1 / 3, start=2 / 3, end=45.99999999999999),
             record(end=math.inf), record(start=5.0, end=5.0),
             record(sizes=((10.0, 2), (12.25, 5), (17.0, 1)), end=30.123456789)]
    for _ in range(200):
        start = rnd.uniform(0, 1e7)
        cases.append(record(submit=rnd.choice([float(rnd.randint(0, 10**6)), rnd.random()]),
                            start=start, end=start + rnd.expovariate(1e-4),
                            sizes=((start, rnd.randint(1, 8)),)))
    for rec in cases:
        assert written(rec, 0, 0) == by_csv(rec, 0, 0)


@pytest.mark.parametrize("compiled_path", [False, True])
def test_tee_writes_and_sums_what_add_does(compiled_path: bool,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """Tee's path for a job that ran at one size (its figures made once for both) gives
    the rows and the summary that RecordWriter.add and RunningSummary.add give; so does
    add_ran's compiled-build path (whole floats written from their int), run here too."""
    from malleable.metrics import summary
    from malleable.metrics.summary import RunningSummary, Tee

    monkeypatch.setattr(summary, "_COMPILED", compiled_path)
    rnd = random.Random(5)
    cases = [record(start=None, end=None, state=JobState.WAITING),
             record(start=None, end=4.0, state=JobState.FAILED),
             record(submit=-0.0, start=-0.0, end=0.0), record(start=5.0, end=5.0),
             record(submit=0.0, start=9999999999999998.0, end=1e16),
             record(submit=5.0, start=1e16, end=1e17),
             record(submit=1 / 3, start=2 / 3, end=45.99999999999999),
             record(end=math.inf), record(job_id="a,b"), record(cluster="fs0,fs1"),
             record(sizes=((10.0, 2), (12.25, 5), (17.0, 1)), end=30.123456789)]
    for _ in range(300):
        start = rnd.uniform(0, 1e7)
        cases.append(record(
            job_id=rnd.choice(["1", "j-2", 'q"3']), submit=rnd.choice(
                [float(rnd.randint(0, 10**6)), rnd.random()]), start=start,
            end=start + rnd.choice([rnd.expovariate(1e-4), float(rnd.randint(0, 9))]),
            state=rnd.choice(list(JobState)),
            kind=rnd.choice([JobKind.MOLDABLE, JobKind.MALLEABLE]),
            sizes=((start, rnd.randint(1, 8)),)))
    ways = []
    for tee in (True, False):
        out, totals = io.StringIO(), RunningSummary()
        writer = RecordWriter(out)
        sink = Tee(writer, totals)
        for i, rec in enumerate(cases):
            if tee:
                sink(rec, i % 3, i % 2)
            else:
                writer.add(rec, i % 3, i % 2)
                totals.add(rec, i % 3, i % 2)
        ways.append((out.getvalue(), repr(totals.summary(1.0, 0.5)),
                     repr(totals.mechanism())))
    assert ways[0] == ways[1]


def test_whole_is_repr_of_a_whole_float() -> None:
    """summary._whole (the compiled build's text of a whole float) is repr's, up to and
    past the 1e16 bound where repr turns to exponents."""
    from malleable.metrics.summary import _whole

    values = [0.0, -0.0, 1.0, -1.0, 86400.0, 2.0**53, -(2.0**53), 9999999999999998.0,
              -9999999999999998.0, 1e16, -1e16, 1e17, 1e300, -1e300]
    values += [float(random.Random(i).randint(-10**17, 10**17)) for i in range(200)]
    for value in values:
        assert _whole(value) == repr(value + 0.0), value
