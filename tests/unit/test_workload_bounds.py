"""Issue 19: every out-of-range, wrong-kind or ambiguous workload value is refused with
FILE:LINE and exit code 2; only -1 means unknown; empty workloads and bad headers too."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from malleable.cli import main
from malleable.errors import InputError
from malleable.model import SizeRule
from malleable.workloads.swf import MAX_SIZE, MAX_TIME, parse_swf, read_swf

FIELDS = ["1", "0", "-1", "300", "4", "-1", "-1", "4", "600", "-1", "1", "7", "3", "-1", "-1",
          "-1", "-1", "-1"]
HEADER = "; Version: 2.2\n; MalleableFormat: 1\n; MalleableApp: 1 ft\n; MalleableApp: 2 gadget2\n"


def line(extra: str = "", **changes: str) -> str:
    """An 18-field line (23 with ``extra``) with fields changed by number: line(f4="-1")."""
    fields = list(FIELDS)
    for key, value in changes.items():
        fields[int(key[1:]) - 1] = value
    return " ".join(fields) + (f" {extra}" if extra else "")


BAD_LINES = [
    # times out of range (the 1e20 submit and 1e308 run time), or negative
    (line(f2="1e20"), "submit time 1e20 (field 2) is outside [0, 4294967295] s"),
    (line(f2="4294967296"), "submit time"),
    (line(f2="-5"), "negative submit time -5"),
    (line(f2="-1"), "negative submit time -1"),
    (line(f4="1e308"), "run time 1e308 (field 4) is outside"),
    (line(f4="2e9"), "run time 2e9"),
    (line(f4="-50"), "negative run time -50 (field 4) is outside [0, 1000000000] s or -1"),
    (line(f4="-0.5"), "negative run time -0.5"),
    (line(f4="-2"), "negative run time -2"),
    (line(f9="0"), "requested time 0 (field 9)"),
    (line(f9="-7"), "negative requested time -7"),
    (line(f9="1e12"), "requested time 1e12"),
    # sizes: whole numbers in [1, MAX_SIZE] or -1
    (line(f5="4.5", f8="4.5"), "allocated size 4.5 (field 5) is not a whole number"),
    (line(f8="4.5"), "requested size 4.5 (field 8) is not a whole number"),
    (line(f8="0"), "requested size 0 (field 8) is outside [1, 10000000]"),
    (line(f8="-3"), "negative requested size -3"),
    (line(f5="0", f8="0"), "allocated size 0"),
    (line(f5="-3", f8="-1"), "negative allocated size -3"),
    (line(f5="-3"), "negative allocated size -3"),
    (line(f8=str(MAX_SIZE + 1)), "requested size 10000001"),
    (line(f8="1e9"), "requested size 1e9"),
    (line(f8="2.0000001"), "not a whole number"),
    # numbers
    (line(f1="1.5"), "job number 1.5 (field 1) is not a whole number"),
    (line(f1="-1"), "negative job number -1"),
    (line(f1="1e10"), "job number 1e10"),
    (line(f12="7.5"), "user number 7.5"),
    (line(f13="-4"), "negative group number -4"),
    # malleable fields
    (line("1.5 2 8 -1 -1"), "job kind 1"),
    (line("3 2 8 -1 -1"), "job kind 3"),
    (line("-2 2 8 -1 -1"), "job kind -2"),
    (line("2 0 8 -1 -1"), "minimum size 0 (field 20)"),
    (line("2 -3 8 -1 -1"), "negative minimum size -3"),
    (line("2 2.5 8 -1 -1"), "minimum size 2.5 (field 20) is not a whole number"),
    (line("2 2 0 -1 -1"), "maximum size 0 (field 21)"),
    (line("2 2 8.5 -1 -1"), "maximum size 8.5"),
    (line("2 2 1e8 -1 -1"), "maximum size 1e8"),
    (line("2 2 8 0 -1"), "preferred size 0 (field 22)"),
    (line("2 2 8 -5 -1"), "negative preferred size -5"),
    (line("2 2 8 4.5 -1"), "preferred size 4.5"),
    (line("2 2 8 -1 1.5"), "application number 1.5"),
    (line("2 2 8 -1 -4"), "negative application number -4"),
    (line("2 2 8 -1 7"), "application number 7 has no"),
    (line("2 8 4 -1 2"), "minimum size 8 is above maximum size 4"),
    (line("2 2 3 -1 2"), "initial size 4 is outside [2, 3]"),
    # FT takes powers of two: initial size 3, 6, 12 refused
    (line("2 2 32 -1 1", f5="3", f8="3"), "application ft runs on pow2 sizes only: initial "
                                          "size 3 is not one"),
    (line("2 2 32 -1 1", f5="6", f8="6"), "initial size 6"),
    (line("2 1 32 -1 1", f5="12", f8="-1"), "initial size 12"),
    # non-numbers and field counts
    (line(f4="nan"), "not a finite number"),
    (line(f2="-inf"), "not a finite number"),
    (line(f5="four"), "field 5 is not a number"),
    (line("2 2 8"), "found 21"),
]


@pytest.mark.parametrize(("bad", "message"), BAD_LINES)
def test_a_bad_value_is_refused_with_file_and_line(bad: str, message: str) -> None:
    with pytest.raises(InputError, match=re.escape(message)) as err:
        parse_swf([*HEADER.splitlines(), line(f1="9"), bad], "w.swf")
    assert str(err.value).startswith("w.swf:6: ")


@pytest.mark.parametrize(
    "good",
    [line(f2=str(MAX_TIME)), line(f4=str(MAX_TIME)), line(f4="0"), line(f4="12.5"),
     line(f2="0.25"), line(f8=str(MAX_SIZE)), line(f8="4.0"), line(f8="-1"), line(f9="-1"),
     line(f12="-1", f13="-1"), line(f1="0"), line("2 2 32 -1 1", f5="8", f8="8"),
     line("2 1 32 -1 1", f5="1", f8="1"), line("2 2 46 -1 2", f5="3", f8="3"),
     line("-1 -1 -1 -1 -1"), line("1 2 8 4 2")],
)
def test_values_within_the_bounds_are_read(good: str) -> None:
    (job,) = parse_swf([*HEADER.splitlines(), good]).jobs
    assert job.initial_size >= 1


def test_a_pow2_job_keeps_its_rule() -> None:
    (job,) = parse_swf([*HEADER.splitlines(), line("2 2 32 -1 1", f5="16", f8="16")]).jobs
    assert job.size_rule is SizeRule.POW2 and job.initial_size == 16


@pytest.mark.parametrize(
    ("header", "message"),
    [
        ("; MalleableFormat: 2", "MalleableFormat '2' is not a version this reader knows"),
        ("; MalleableFormat: 1.0", "MalleableFormat '1.0'"),
        ("; MalleableFormat:", "MalleableFormat ''"),
        ("; MalleableFormat: one", "MalleableFormat 'one'"),
        ("; MalleableApp: 1 gadget2", "application number 1 is named twice (first 'ft')"),
        ("; MalleableApp: x ft", "expected '; MalleableApp: N NAME'"),
        ("; MalleableApp: 3", "expected '; MalleableApp: N NAME'"),
        ("; MalleableApp: -1 ft", "expected '; MalleableApp: N NAME'"),
        ("; MalleableApp: 3 ft extra", "expected '; MalleableApp: N NAME'"),
        ("; MalleableApp: 99999999999 ft", "application number 99999999999 is above"),
        # a bad name is refused at its header line, even when no job uses it
        ("; MalleableApp: 7 amdahl:1.5", "the serial fraction must be in [0, 1]"),
        ("; MalleableApp: 7 amdahl:-0.1", "the serial fraction must be in [0, 1]"),
        ("; MalleableApp: 7 lammps", "unknown application 'lammps'"),
    ],
)
def test_a_bad_header_line_is_refused(header: str, message: str) -> None:
    with pytest.raises(InputError, match=re.escape(message)) as err:
        parse_swf([*HEADER.splitlines(), header, line()], "w.swf")
    assert str(err.value).startswith("w.swf:5: ")


@pytest.mark.parametrize(
    ("app", "message"),
    [
        ("amdahl:1.5", "application 'amdahl:1.5': the serial fraction must be in [0, 1]"),
        ("amdahl:-0.1", "serial fraction must be in"),
        ("amdahl:x", "serial fraction must be in"),
        ("amdahl:", "serial fraction must be in"),
        ("amdahl:nan", "serial fraction must be in"),
        ("lammps", "unknown application 'lammps'; valid: fixed, amdahl:S, ft"),
    ],
)
def test_a_bad_application_says_why(app: str, message: str) -> None:
    with pytest.raises(InputError, match=re.escape(message)) as err:
        parse_swf([f"; MalleableApp: 1 {app}", line("2 2 8 -1 1")], "w.swf")
    assert str(err.value).startswith("w.swf:1: ")  # the header line that names it


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "no jobs: the file has only comments or blank lines"),
        ("\n\n   \n", "no jobs"),
        ("; Version: 2.2\n; only comments\n", "no jobs"),
        ("\ufeff; Version: 2.2\n", "no jobs"),
        (f"{line(f4='-1')}\n{line(f1='2', f5='-1', f8='-1')}\n",
         "no jobs to simulate: all 2 have an unknown (-1) run time or size"),
    ],
)
def test_a_workload_without_jobs_is_refused(text: str, message: str, tmp_path: Path) -> None:
    path = tmp_path / "w.swf"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(InputError, match=re.escape(message)) as err:
        read_swf(path)
    assert str(err.value).startswith(f"{path}: ")


def test_a_byte_order_mark_is_accepted(tmp_path: Path) -> None:
    path = tmp_path / "bom.swf"
    path.write_text("\ufeff" + HEADER + line("2 2 32 -1 1") + "\n", encoding="utf-8")
    assert [j.app for j in read_swf(path).jobs] == ["ft"]
    path.write_text("\ufeff" + line() + "\n", encoding="utf-8")
    assert [j.id for j in read_swf(path).jobs] == ["1"]


@pytest.mark.parametrize("data", [b"\xff\xfe; utf-16\n", b"; caf\xe9\n" + line().encode(),
                                  line().encode() + b"\n\x80\n", b"\xef\xbb"])
def test_a_file_that_is_not_utf8_is_refused(data: bytes, tmp_path: Path) -> None:
    path = tmp_path / "latin.swf"
    path.write_bytes(data)
    with pytest.raises(InputError, match=r": not UTF-8 text \(byte 0x") as err:
        read_swf(path)
    assert str(err.value).startswith(f"{path}: not UTF-8 text")


def test_a_directory_is_refused(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="cannot read workload"):
        read_swf(tmp_path)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (line(f2="1e20") + "\n", ":1: submit time 1e20"),
        (line(f4="1e308") + "\n", ":1: run time 1e308"),
        (line(f5="4.5", f8="4.5") + "\n", ":1: allocated size 4.5"),
        (line(f8="0") + "\n", ":1: requested size 0"),
        (line(f4="-50") + "\n", ":1: negative run time -50"),
        ("; nothing\n", ": no jobs"),
        ("; MalleableFormat: 9\n" + line() + "\n", ":1: MalleableFormat '9'"),
        ("; MalleableApp: 1 ft\n; MalleableApp: 1 gadget2\n", ":2: application number 1"),
        ("; MalleableApp: 1 ft\n" + line("2 2 32 -1 1", f5="3", f8="3") + "\n",
         ":2: application ft runs on pow2 sizes only"),
        ("; MalleableApp: 1 amdahl:1.5\n" + line("2 2 8 -1 1") + "\n",
         ":1: application 'amdahl:1.5': the serial fraction must be in [0, 1]"),
    ],
)
def test_the_cli_refuses_in_one_line_with_exit_code_2(
        text: str, message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "w.swf"
    path.write_text(text, encoding="utf-8")
    out = tmp_path / "out"
    assert main(["simulate", "--workload", str(path), "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"malleable: error: {path}{message}")
    assert err.count("\n") == 1 and "Traceback" not in err
    assert not out.exists()


def test_the_cli_refuses_latin1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "w.swf"
    path.write_bytes(b"; r\xe9sum\xe9\n" + line().encode() + b"\n")
    assert main(["simulate", "--workload", str(path)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"malleable: error: {path}: not UTF-8 text") and err.count("\n") == 1
