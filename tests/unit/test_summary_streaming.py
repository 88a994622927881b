"""The summary's means read their figures once, without a list (issue 17, memory at 1M)."""

from __future__ import annotations

import io
import json
import math
import random
from collections.abc import Iterator

from malleable.metrics.records import JobRecord
from malleable.metrics.summary import (
    RecordWriter,
    RunningSummary,
    Tee,
    _mean,
    _median,
    mechanism,
    summarize,
)
from malleable.model import JobKind, JobSpec, JobState, Operation


def test_mean_of_a_generator_is_the_list_mean_to_the_last_bit() -> None:
    rng = random.Random(7)
    values = [rng.uniform(0, 1e6) for _ in range(10_000)] + [math.nan, 1e-9, 3e15]
    rng.shuffle(values)
    finite = [v for v in values if not math.isnan(v)]
    expected = sum(finite) / len(finite)
    assert _mean(v for v in values) == expected
    assert _mean(values) == expected


def test_mean_reads_its_values_once_and_ignores_nan() -> None:
    reads = []

    def figures() -> Iterator[float]:
        for v in (1.0, math.nan, 2.0, 6.0):
            reads.append(v)
            yield v

    assert _mean(figures()) == 3.0
    assert len(reads) == 4
    assert math.isnan(_mean(iter([math.nan])))
    assert math.isnan(_mean(iter([])))


def test_median_sorts_its_own_list() -> None:
    assert _median([3.0, 1.0, 2.0]) == 2.0
    assert _median([4.0, 1.0, 3.0, 2.0]) == 2.5
    assert math.isnan(_median([]))


def _records() -> list[JobRecord]:
    """Every shape a record takes: rigid, resized, 0 s long, failed, rejected, running,
    waiting, on several applications, with times that do not add up exactly."""
    rng = random.Random(11)
    out = []
    for n in range(400):
        app = rng.choice(["fixed", "ft", "gadget2"])
        kind = JobKind.RIGID if app == "fixed" else JobKind.MALLEABLE
        size = rng.choice([2, 4])
        low, high = (size, size) if kind is JobKind.RIGID else (2, 32)
        record = JobRecord(JobSpec(str(n), kind, low, high, size, submit_time=n * 0.7, app=app,
                                   runtime=3.0))
        shape = rng.randrange(7)
        start = n * 0.7 + rng.random() * 5
        if shape in (0, 1, 2, 3):  # ran and ended, maybe resized, maybe 0 s long
            end = start if shape == 3 else start + rng.random() * 100
            record.place(start, "c")
            record.resize(start, size)
            if shape == 1 and kind is JobKind.MALLEABLE:
                record.resize(start + (end - start) / 3, size * 2)
            record.finish(end, JobState.FAILED if shape == 2 else JobState.COMPLETED)
        elif shape == 4:  # rejected before it ran
            record.finish(start, JobState.FAILED, "too big")
        elif shape == 5:  # running at the end
            record.place(start, "c")
            record.resize(start, size)
        out.append(record)  # shape 6: still waiting
    return out


def test_running_summary_equals_summarize_to_the_last_bit() -> None:
    records = _records()
    operations = [Operation(1.0, "grow", "1", "c", 2), Operation(2.0, "shrink", "1", "c", 1)]
    totals = RunningSummary()
    for record in records:
        kinds = [op.kind for op in operations if op.job_id == record.spec.id]
        totals.add(record, kinds.count("grow"), kinds.count("shrink"))
    expected = summarize(records, operations, 10.0, 0.5)
    got = totals.summary(10.0, 0.5)
    assert json.dumps(got) == json.dumps(expected)  # NaN, -0.0 and every bit compared
    assert json.dumps(totals.mechanism()) == json.dumps(mechanism(records))


def test_tee_writes_each_row_and_adds_each_record_to_the_summary() -> None:
    records = _records()[:50]
    rows, alone = io.StringIO(), io.StringIO()
    totals, expected = RunningSummary(), RunningSummary()
    tee, writer = Tee(RecordWriter(rows), totals), RecordWriter(alone)
    for n, record in enumerate(records):
        tee(record, n % 3, n % 2)
        writer.add(record, n % 3, n % 2)
        expected.add(record, n % 3, n % 2)
    assert rows.getvalue() == alone.getvalue()
    assert rows.getvalue().count("\n") == len(records) + 1  # the header, then a row a job
    assert json.dumps(totals.summary(10.0, 0.5)) == json.dumps(expected.summary(10.0, 0.5))
    assert json.dumps(totals.mechanism()) == json.dumps(expected.mechanism())
