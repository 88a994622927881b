"""The vectorized reader of plain SWF files gives the line-by-line reader's workload, and
every file it does not take in full goes back to the line reader (same message, same line)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from malleable.apps import standard_catalog
from malleable.errors import InputError
from malleable.workloads import swf, swf_plain
from malleable.workloads.swf import SwfWorkload, parse_swf, read_jobs, read_plain, read_swf

FIELDS = ["1", "0", "-1", "300", "4", "-1", "-1", "4", "600", "-1", "1", "7", "3", "-1", "-1",
          "-1", "-1", "-1"]
CATALOG = standard_catalog()
HEADERS = ["; Version: 2.2", ";", "  ;\tMaxNodes: 128", "; MalleableFormat: 1",
           "; MalleableApp: 1 ft", "; note ; with ; semicolons"]
#: Tokens each field may hold: good ones and every kind of odd one.
ODD = ["-1", "0", "-0", "-0.0", "+7", "7.5", "4.0", "1e3", "1E2", ".5", "5.", "007", "-2",
       "1e400", "1e308", "inf", "nan", "x", "1_000", "0x10", "9" * 20, "1-2", "-", "1e",
       "2147483648", "1000000001", "10000001"]


def line(**changes: str) -> str:
    """An 18-field line with fields changed by 1-based number: line(f4="-1")."""
    fields = list(FIELDS)
    for key, value in changes.items():
        fields[int(key[1:]) - 1] = value
    return " ".join(fields)


def line_path(text: str, source: str) -> str:
    """What the line-by-line reader makes of ``text``: its workload's repr or its error."""
    try:
        workload = parse_swf(text.splitlines(), source, CATALOG)
        swf._check_not_empty(workload, source)
    except InputError as exc:
        return f"error: {exc}"
    return repr(workload)  # repr: -0.0 and 0.0 differ, int and float differ


def read(path: Path) -> str:
    try:
        return repr(read_swf(path, CATALOG))
    except InputError as exc:
        return f"error: {exc}"


def write(tmp_path: Path, text: str, name: str = "t.swf") -> Path:
    path = tmp_path / name
    path.write_bytes(text.encode())
    return path


@st.composite
def plain_lines(draw: st.DrawFn, odd: bool) -> list[str]:
    """Data lines (job number = line index unless odd), header lines and blank lines."""
    out: list[str] = []
    if not odd and draw(st.booleans()):
        out.append("; MalleableApp: 1 ft")  # named once: twice is an error
    headers = HEADERS if odd else [h for h in HEADERS if "App" not in h]
    for index in range(draw(st.integers(0, 25))):
        kind = draw(st.sampled_from(["data"] * 8 + ["header", "blank"]))
        if kind == "header":
            out.append(draw(st.sampled_from(headers)))
            continue
        if kind == "blank":
            out.append(draw(st.sampled_from(["", "  ", "\t"])))
            continue
        fields = [str(index + 1), str(draw(st.integers(0, 10**6))),
                  *(draw(st.sampled_from(["-1", "0", "3"])) for _ in range(16))]
        fields[3] = draw(st.sampled_from(["-1", "0", "60", "7200", "0.5", "1e3"]))
        fields[4] = draw(st.sampled_from(["-1", "1", "2", "32"]))
        fields[7] = draw(st.sampled_from(["-1", "1", "4", "64"]))
        fields[8] = draw(st.sampled_from(["-1", "1", "900", "1.5"]))
        fields[11] = draw(st.sampled_from(["-1", "0", "5", "12"]))
        fields[12] = draw(st.sampled_from(["-1", "0", "2"]))
        if odd and draw(st.integers(0, 9)) == 0:
            fields[draw(st.integers(0, 17))] = draw(st.sampled_from(ODD))
        if odd and draw(st.integers(0, 29)) == 0:
            fields = fields[:draw(st.sampled_from([17, 19, 23]))] + ["-1"] * 5
        gap = draw(st.sampled_from([" ", "\t", "  ", " \t "]))
        out.append(draw(st.sampled_from(["", " ", "\t"])) + gap.join(fields))
    return out


#: Block sizes: a line split over blocks, a block a line or so, a few lines, the default.
BLOCKS = st.sampled_from([1, 5, 37, 60, 200, swf_plain.BLOCK_BYTES])


def text_of(lines: list[str], crlf: bool) -> str:
    return ("\r\n" if crlf else "\n").join(lines) + ("\n" if lines else "")


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow,
          HealthCheck.function_scoped_fixture])
@given(lines=plain_lines(odd=True), crlf=st.booleans(), block=BLOCKS)
def test_a_trace_reads_as_the_line_reader_reads_it(tmp_path: Path, lines: list[str],
                                                   crlf: bool, block: int) -> None:
    text = text_of(lines, crlf)
    path = write(tmp_path, text)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(swf_plain, "BLOCK_BYTES", block)  # blocks end anywhere in a line
        assert read(path) == line_path(text, str(path))


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow,
          HealthCheck.function_scoped_fixture])
@given(lines=plain_lines(odd=False), crlf=st.booleans(), block=BLOCKS)
def test_a_good_plain_trace_is_read_by_the_vectorized_reader(tmp_path: Path, lines: list[str],
                                                             crlf: bool, block: int) -> None:
    text = text_of(lines, crlf)
    path = write(tmp_path, text)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(swf_plain, "BLOCK_BYTES", block)
        workload = read_plain(path, CATALOG)
    assert workload is not None
    expected = parse_swf(text.splitlines(), str(path), CATALOG)
    assert repr(workload) == repr(expected)


def test_numbers_are_the_values_float_gives(tmp_path: Path) -> None:
    tokens = ["0.1", "0.3", "2.675", "1e-5", "123456.789", "1.7976931348623157e308", "5e-324",
              "0.30000000000000004", "9007199254740993", "-0.0", "1E+2"]
    lines = [line(f1=str(i + 1), f3=token) for i, token in enumerate(tokens)]
    lines.append(line(f1="99", f2="0.1", f4="2.675", f9="1.3"))
    path = write(tmp_path, "\n".join(lines) + "\n")
    workload = read_plain(path, CATALOG)
    assert workload is not None and repr(workload) == line_path(path.read_text(), str(path))
    assert workload.jobs[-1].submit_time == float("0.1")
    assert (workload.jobs[-1].runtime, workload.jobs[-1].walltime) == (2.675, 1.3)


def test_whole_numbers_keep_minus_zero_a_float(tmp_path: Path) -> None:
    path = write(tmp_path, line(f2="-0", f4="-0") + "\n")
    workload = read_plain(path, CATALOG)
    assert workload is not None
    (job,) = workload.jobs
    assert repr((job.submit_time, job.runtime)) == "(-0.0, -0.0)"


#: One line of each kind the readers refuse, and the message they give at line 3.
REFUSED = [
    (line()[:-3], "expected 18 SWF fields (or 23 with the malleable ones), found 17"),
    (line() + " 5", "expected 18 SWF fields (or 23 with the malleable ones), found 19"),
    (line(f6="x"), "field 6 is not a number: 'x'"),
    (line(f14="0x10"), "field 14 is not a number: '0x10'"),
    (line(f15="inf"), "field 15 is not a finite number: 'inf'"),
    (line(f3="1e400"), "field 3 is not a finite number: '1e400'"),
    (line(f1="-3"), "negative job number -3 (field 1) is outside [0, 2147483647]"),
    (line(f2="1e20"), "submit time 1e20 (field 2) is outside [0, 4294967295] s"),
    (line(f4="-50"), "negative run time -50 (field 4) is outside [0, 1000000000] s or -1 "
                     "(unknown)"),
    (line(f5="0"), "allocated size 0 (field 5) is outside [1, 10000000] or -1 (unknown)"),
    (line(f8="4.5"), "requested size 4.5 (field 8) is not a whole number"),
    (line(f9="0"), "requested time 0 (field 9) is outside [1, 1000000000] s or -1 (unknown)"),
    (line(f12="2147483648"), "user number 2147483648 (field 12) is outside [0, 2147483647] "
                             "or -1 (unknown)"),
    (line(f13="1.5"), "group number 1.5 (field 13) is not a whole number"),
    (line(f1="1"), "job number 1 appears twice"),
    ("; MalleableFormat: 2", "MalleableFormat '2' is not a version this reader knows (1)"),
    ("; MalleableApp: 1 nope", "unknown application 'nope'; valid: "),
    ("; MalleableApp: x", "expected '; MalleableApp: N NAME' (N a whole number >= 0)"),
]


@pytest.mark.parametrize(("bad", "message"), REFUSED)
def test_a_bad_line_gives_the_line_readers_message(tmp_path: Path, bad: str,
                                                   message: str) -> None:
    for later in ([], [line(f1="7", f5="x")]):  # only the first error is reported
        text = "\n".join(["; Version: 2.2", line(), bad, *later, line(f1="8")]) + "\n"
        path = write(tmp_path, text)
        assert read_plain(path, CATALOG) is None
        got = read(path)
        assert got == line_path(text, str(path))
        assert got.startswith(f"error: {path}:3: {message}")


def test_an_error_in_a_later_block_keeps_its_line(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    lines = ["; Version: 2.2", *(line(f1=str(n)) for n in range(1, 200)), "; MalleableFormat: 9",
             line(f1="500", f4="x")]
    path = write(tmp_path, "\n".join(lines) + "\n")
    monkeypatch.setattr(swf_plain, "BLOCK_BYTES", 256)
    assert read(path) == f"error: {path}:201: MalleableFormat '9' is not a version this " \
                         "reader knows (1)"


@pytest.mark.parametrize("text", [
    "\ufeff" + line() + "\n",  # a byte-order mark
    "; Computer: Rechner für alle\n" + line() + "\n",  # UTF-8 in the header
    line() + "\r" + line(f1="2") + "\n",  # a lone \r ends a line for splitlines
    line() + "\x0c\n" + line(f1="2") + "\n",  # so does a form feed
    line() + "\x1f\n",  # a blank for str.split, not for bytes.split
    "; MalleableFormat: 1\n; MalleableApp: 1 ft\n" + line() + " 2 1 8 -1 1\n"
    + line(f1="2") + "\n",  # 23 fields, then 18
    line(f3="1_000") + "\n",  # float() takes it, numpy does not
    line(f3="+7") + "\n" + line(f1="2") + "\n",
])
def test_any_other_file_is_read_line_by_line(tmp_path: Path, text: str) -> None:
    path = write(tmp_path, text)
    assert read(path) == line_path(text.encode().decode("utf-8"), str(path))
    if "+7" in text:  # numpy takes it too, as float does: read in full
        assert read_plain(path, CATALOG) is not None
    else:
        assert read_plain(path, CATALOG) is None


def test_skipped_jobs_are_counted_and_logged_once(tmp_path: Path,
                                                  caplog: pytest.LogCaptureFixture) -> None:
    text = "\n".join([line(), line(f1="2", f4="-1"), line(f1="3", f5="-1", f8="-1"),
                      line(f1="3", f4="-1")]) + "\n"  # a skipped job's number may repeat
    path = write(tmp_path, text)
    with caplog.at_level(logging.WARNING, logger="malleable.workloads.swf"):
        workload = read_swf(path, CATALOG)
    assert isinstance(workload, SwfWorkload)
    assert (len(workload.jobs), workload.skipped) == (1, 3)
    assert [r.getMessage() for r in caplog.records] == [
        f"{path}: skipped 3 jobs with unknown run time or size"]
    assert read_plain(path, CATALOG) is not None


@pytest.mark.parametrize(("text", "message"), [
    ("", "no jobs: the file has only comments or blank lines"),
    ("; only\n\n  \n", "no jobs: the file has only comments or blank lines"),
    (line(f4="-1") + "\n", "no jobs to simulate: all 1 have an unknown (-1) run time or size"),
])
def test_a_file_without_jobs_is_refused(tmp_path: Path, text: str, message: str) -> None:
    path = write(tmp_path, text)
    assert read(path) == f"error: {path}: {message}"


def _trace(tmp_path: Path, n: int = 40) -> Path:
    """A plain trace with equal submit times out of file order, skipped jobs and users."""
    lines = ["; Version: 2.2"]
    for i in range(1, n + 1):
        submit = (n - i) // 3 * 10  # descending, three jobs a time: ties keep file order
        runtime = -1 if i % 7 == 0 else 60 * i
        lines.append(line(f1=str(i), f2=str(submit), f4=str(runtime), f8=str(1 + i % 4),
                          f9="-1" if i % 5 == 0 else "900", f12=str(i % 3 - 1),
                          f13=str(i % 2)))
    return write(tmp_path, "\n".join(lines) + "\n")


def test_a_table_makes_the_jobs_of_the_line_reader(tmp_path: Path) -> None:
    path = _trace(tmp_path)
    trace = swf_plain.read_table(path, CATALOG, swf._LIMITS, swf.header_line)
    assert trace is not None
    table, skipped, header = trace
    expected = parse_swf(path.read_text().splitlines(), str(path), CATALOG)
    assert (skipped, header) == (expected.skipped, expected.header) == (5, ["; Version: 2.2"])
    assert len(table) == 35 and repr(table.batch(0, 35)) == repr(expected.jobs)
    assert repr(table.batch(10, 13)) == repr(expected.jobs[10:13])
    assert table.first_submit == 130.0 and swf_plain.JobTable(
        table._rows[:0]).first_submit == 0.0


def test_read_jobs_gives_a_plain_trace_in_submit_order(tmp_path: Path,
                                                       caplog: pytest.LogCaptureFixture) -> None:
    path = _trace(tmp_path)
    with caplog.at_level(logging.WARNING, logger="malleable.workloads.swf"):
        table = read_jobs(path)
    assert [r.getMessage() for r in caplog.records] == [
        f"{path}: skipped 5 jobs with unknown run time or size"]
    assert isinstance(table, swf_plain.JobTable)
    ordered = sorted(read_swf(path).jobs, key=lambda j: j.submit_time)  # stable, as simulate
    assert repr(table.batch(0, len(table))) == repr(ordered)
    assert table.first_submit == ordered[0].submit_time == 0.0


def test_read_jobs_leaves_any_other_file_to_read_swf(tmp_path: Path) -> None:
    malleable = write(tmp_path, "; MalleableFormat: 1\n; MalleableApp: 1 ft\n"
                      + line() + " 2 1 8 -1 1\n")
    assert read_jobs(malleable) == read_swf(malleable).jobs
    for text, message in [(line(f4="-1") + "\n", "no jobs to simulate"),
                          (line() + "\n" + line() + "\n", "job number 1 appears twice")]:
        path = write(tmp_path, text, "bad.swf")
        with pytest.raises(InputError, match=message):
            read_jobs(path)
    with pytest.raises(InputError, match="cannot read workload"):
        read_jobs(tmp_path / "missing.swf")
