"""Issue 19: jobs.csv agrees with the summary (resizes = grows + shrinks = operations), and
floats are rounded for output only."""

from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from malleable.cli import main
from malleable.metrics.records import JobRecord
from malleable.metrics.summary import (
    RECORD_COLUMNS,
    RecordWriter,
    csv_cell,
    resize_counts,
    write_records,
)
from malleable.model import JobKind, JobSpec, JobState, Operation


@pytest.mark.parametrize("argv", [
    [],
    ["--policy", "egs", "--approach", "pwa", "--workload", "wm-prime"],
    ["--policy", "fpsma", "--approach", "pwa", "--workload", "wmr-prime", "--seed", "3"],
    ["--policy", "egs", "--approach", "pra", "--workload", "wmr"],
    ["--policy", "equipartition", "--workload", "wm", "--seed", "2"],
    ["--policy", "fcfs"],
    ["--policy", "easy", "--workload", "wmr-prime"],
    ["--policy", "fpsma", "--release-delay", "30", "--reconfig-cost", "5"],
])
def test_the_resizes_column_sums_to_the_operations(argv: list[str], tmp_path: Path,
                                                   capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", "--json", "--out", str(tmp_path), *argv]) == 0
    summary = json.loads(capsys.readouterr().out)
    with (tmp_path / "jobs.csv").open(encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert sum(int(r["grows"]) for r in rows) == summary["grow_ops"]
    assert sum(int(r["shrinks"]) for r in rows) == summary["shrink_ops"]
    assert sum(int(r["resizes"]) for r in rows) == summary["grow_ops"] + summary["shrink_ops"]
    assert all(int(r["resizes"]) == int(r["grows"]) + int(r["shrinks"]) for r in rows)
    for row in rows:  # no float noise in any cell
        for key in ("submit", "start", "end", "wait_s", "execution_s", "avg_size"):
            assert len(row[key].partition(".")[2]) <= 6, (key, row[key])


def test_the_readme_command_counts_the_grow_at_start(tmp_path: Path) -> None:
    assert main(["simulate", "--out", str(tmp_path)]) == 0
    with (tmp_path / "jobs.csv").open(encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 300 and all(r["resizes"] == "1" for r in rows)


def test_resize_counts_count_each_operation() -> None:
    ops = [Operation(0.0, "place", "a", "c", 2), Operation(0.0, "grow", "a", "c", 6),
           Operation(5.0, "shrink", "a", "c", 2), Operation(5.0, "grow", "a", "c", 2),
           Operation(7.0, "grow", "b", "c", 1), Operation(9.0, "cancel", "b", "c", 0)]
    assert resize_counts(ops) == {"a": (2, 1), "b": (1, 0)}


@pytest.mark.parametrize(("value", "cell"), [
    (45.99999999999999, 46.0), (0.1 + 0.2, 0.3), (1e-9, 0.0), (-1e-12, 0.0),
    (165.45815217391257, 165.458152), (math.nan, ""), (3, 3), ("x", "x"), (35943.75, 35943.75),
    (-0.0, 0.0), (12.0, 12.0), (1e300, 1e300), (math.inf, math.inf), (-math.inf, -math.inf),
])
def test_csv_cells_round_floats_for_output(value: object, cell: object) -> None:
    assert csv_cell(value) == cell
    assert str(csv_cell(value)) == str(cell)  # no "-0.0"


def test_write_records_rounds_but_records_keep_every_bit(tmp_path: Path) -> None:
    rec = JobRecord(JobSpec("j", JobKind.MALLEABLE, 1, 8, 2, submit_time=0.1 + 0.2))
    rec.resize(0.1 + 0.2, 2)
    rec.resize(1.0, 4)
    rec.finish(46.29999999999999, JobState.COMPLETED)
    write_records(tmp_path / "j.csv", [rec], [Operation(1.0, "grow", "j", "c", 2)])
    row = next(csv.DictReader((tmp_path / "j.csv").open(encoding="utf-8")))
    assert (row["submit"], row["end"], row["execution_s"]) == ("0.3", "46.3", "46.0")
    assert (row["resizes"], row["grows"], row["shrinks"]) == ("1", "1", "0")
    assert rec.end == 46.29999999999999


def _reference_rows(records: list[JobRecord], counts: dict[str, tuple[int, int]]) -> str:
    """The CSV as the first writer made it: a dict per row through ``csv.DictWriter``,
    JobRecord's own properties, every value through :func:`csv_cell`."""
    out = io.StringIO(newline="")
    writer = csv.DictWriter(out, fieldnames=RECORD_COLUMNS)
    writer.writeheader()
    for r in records:
        grows, shrinks = counts.get(r.spec.id, (0, 0))
        row = {"job": r.spec.id, "kind": r.spec.kind.value, "app": r.spec.app,
               "cluster": r.cluster, "state": r.state.value, "submit": r.spec.submit_time,
               "start": r.start, "end": r.end, "wait_s": r.wait, "execution_s": r.execution,
               "response_s": r.response, "avg_size": r.avg_size, "max_size": r.max_size,
               "min_size": r.spec.min_size, "max_allowed": r.spec.max_size,
               "initial_size": r.spec.initial_size, "resizes": grows + shrinks,
               "grows": grows, "shrinks": shrinks}
        writer.writerow({k: csv_cell(v) for k, v in row.items()})
    return out.getvalue()


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(
    st.floats(0, 1e7), st.one_of(st.none(), st.floats(0, 1e6)),
    st.one_of(st.none(), st.floats(0, 1e6)), st.lists(st.integers(1, 64), max_size=3),
    st.sampled_from(list(JobState)), st.integers(0, 3), st.integers(0, 3)), max_size=8))
def test_the_record_writer_writes_what_the_dict_writer_wrote(jobs: list[Any]) -> None:
    records, counts = [], {}
    for i, (submit, start, run, steps, state, grows, shrinks) in enumerate(jobs):
        rec = JobRecord(JobSpec(f"j{i},\"x\"", JobKind.MALLEABLE, 1, 64, 2,
                                submit_time=submit), cluster="c")
        if start is not None:
            rec.resize(submit + start, 2)
            for k, size in enumerate(steps):
                rec.resize(submit + start + k * 0.1 + 1 / 3, size)
            if run is not None:
                rec.finish(submit + start + run, state)
        records.append(rec)
        counts[rec.spec.id] = (grows, shrinks)
    out = io.StringIO(newline="")
    writer = RecordWriter(out)
    for rec in records:
        writer.add(rec, *counts[rec.spec.id])
    assert out.getvalue() == _reference_rows(records, counts)
