"""The SWF reader/writer and how bad workload files are reported."""

from __future__ import annotations

from pathlib import Path

import pytest

from malleable.cli import main
from malleable.errors import InputError
from malleable.model import JobKind, SizeRule
from malleable.workloads.koala import koala_workload
from malleable.workloads.swf import parse_swf, read_swf, write_swf

PLAIN = "1 0 -1 300 4 -1 -1 4 600 -1 1 7 3 -1 -1 -1 -1 -1"


def test_round_trip_keeps_the_malleable_fields(tmp_path: Path) -> None:
    jobs = koala_workload("wmr", 5, jobs=20)
    write_swf(tmp_path / "w.swf", jobs)
    back = read_swf(tmp_path / "w.swf").jobs
    assert [(j.kind, j.min_size, j.max_size, j.initial_size, j.app, j.size_rule, j.submit_time)
            for j in back] == [(j.kind, j.min_size, j.max_size, j.initial_size, j.app,
                                j.size_rule, j.submit_time) for j in jobs]


def test_plain_swf_reads_as_rigid_fixed_jobs() -> None:
    (job,) = parse_swf(["; Version: 2.2", PLAIN]).jobs
    assert (job.kind, job.initial_size, job.runtime, job.walltime, job.user, job.group) == (
        JobKind.RIGID, 4, 300.0, 600.0, "7", "3")


def test_unknown_run_time_is_skipped_and_counted() -> None:
    unknown = PLAIN.replace(" 300 ", " -1 ", 1)
    w = parse_swf([PLAIN, unknown.replace("1 0", "2 0", 1)])
    assert (len(w.jobs), w.skipped) == (1, 1)


def test_pow2_application_gets_its_size_rule() -> None:
    w = parse_swf(["; MalleableApp: 1 ft",
                   "1 0 -1 -1 2 -1 -1 2 -1 -1 -1 -1 -1 -1 -1 -1 -1 -1 2 2 32 -1 1"])
    assert w.jobs[0].size_rule is SizeRule.POW2


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("1 0 -1 300 4", "expected 18 SWF fields"),
        (PLAIN.replace("300", "abc"), "field 4 is not a number"),
        (PLAIN.replace("1 0 ", "1 -5 ", 1), "negative submit time"),
        (PLAIN + " 2 8 4 -1 -1", "minimum size 8 is above maximum size 4"),
        (PLAIN + " 2 2 8 -1 9", "application number 9"),
    ],
)
def test_bad_lines_name_file_and_line(line: str, message: str) -> None:
    with pytest.raises(InputError, match=message) as err:
        parse_swf(["; header", line], "w.swf")
    assert str(err.value).startswith("w.swf:2: ")


def test_cli_reports_a_bad_file_in_one_line_with_exit_code_2(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.swf"
    bad.write_text("; MalleableApp: 1 nosuchapp\n" + PLAIN + " 2 2 8 -1 1\n")
    assert main(["simulate", "--workload", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"{bad}:1: unknown application 'nosuchapp'" in err
    assert "Traceback" not in err
