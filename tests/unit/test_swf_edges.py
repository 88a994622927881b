"""SWF reader edge cases: comments anywhere, -1 fields, odd spacing, bad lines with file:line."""

from __future__ import annotations

from pathlib import Path

import pytest

from malleable.errors import InputError
from malleable.model import JobKind
from malleable.workloads.swf import parse_swf, read_swf

FIELDS = ["1", "0", "-1", "300", "4", "-1", "-1", "4", "600", "-1", "1", "7", "3", "-1", "-1",
          "-1", "-1", "-1"]


def line(**changes: str) -> str:
    """An 18-field line with fields changed by 1-based number: line(f4="-1")."""
    fields = list(FIELDS)
    for key, value in changes.items():
        fields[int(key[1:]) - 1] = value
    return " ".join(fields)


def test_comments_and_blank_lines_anywhere() -> None:
    w = parse_swf(["; Version: 2.2", "", line(), ";  a note in the middle", "   ",
                   line(f1="2"), "; trailing comment"])
    assert [j.id for j in w.jobs] == ["1", "2"]
    assert w.header == ["; Version: 2.2", ";  a note in the middle", "; trailing comment"]


def test_tabs_and_extra_spaces_separate_fields() -> None:
    (job,) = parse_swf(["\t" + "\t ".join(FIELDS) + "  \r"]).jobs
    assert (job.initial_size, job.runtime) == (4, 300.0)


def test_minus_one_fields_take_their_documented_defaults() -> None:
    (job,) = parse_swf([line(f8="-1", f9="-1", f12="-1", f13="-1")]).jobs
    assert job.initial_size == 4  # requested size unknown: allocated size
    assert (job.walltime, job.user, job.group) == (None, "", "")
    assert job.kind is JobKind.RIGID and job.app == "fixed"


def test_jobs_without_size_or_run_time_are_skipped_and_counted() -> None:
    # Only -1 means unknown (issue 19): a size of 0 is refused, see test_workload_bounds.py.
    w = parse_swf([line(), line(f1="2", f4="-1"), line(f1="3", f5="-1", f8="-1")])
    assert ([j.id for j in w.jobs], w.skipped) == (["1"], 2)


def test_malleable_fields_at_minus_one() -> None:
    (job,) = parse_swf([line() + " -1 -1 -1 -1 -1"]).jobs
    assert (job.kind, job.min_size, job.max_size, job.preferred_size, job.app) == (
        JobKind.RIGID, 4, 4, None, "fixed")


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        (line(f5="inf", f8="inf"), "field 5 is not a finite number: 'inf'"),
        (line(f2="nan"), "field 2 is not a finite number"),
        (line(f4="3e400"), "field 4 is not a finite number"),
        (line(f3="x"), "field 3 is not a number: 'x'"),
        (line() + " 7", "found 19"),
        (line() + " 5 1 2 -1 -1", "job kind 5"),
        (line() + " 2 1 8 9 -1", "preferred size 9 is outside"),
    ],
)
def test_bad_lines_are_reported_with_file_and_line(bad: str, message: str,
                                                    tmp_path: Path) -> None:
    path = tmp_path / "trace.swf"
    path.write_text(f"; header\n\n{line()}\n; comment\n{bad}\n", encoding="utf-8")
    with pytest.raises(InputError, match=message) as err:
        read_swf(path)
    assert str(err.value).startswith(f"{path}:5: ")


def test_a_duplicate_job_number_names_its_line() -> None:
    with pytest.raises(InputError, match=r"^t.swf:3: job number 1 appears twice"):
        parse_swf([line(), "; c", line()], "t.swf")


def test_a_missing_file_is_an_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="cannot read workload") as err:
        read_swf(tmp_path / "nope.swf")
    assert str(tmp_path / "nope.swf") in str(err.value)


def test_an_empty_or_comment_only_file_has_no_jobs() -> None:
    assert parse_swf([]).jobs == []
    w = parse_swf(["; only", ";comments"])
    assert (w.jobs, w.skipped, len(w.header)) == ([], 0, 2)
