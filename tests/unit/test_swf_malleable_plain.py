"""The vectorized reader on malleable SWF files (23 fields a line) gives the line-by-line
reader's workload, and any file it does not take in full goes back to the line reader
(same message, same line)."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from malleable.apps import standard_catalog
from malleable.errors import InputError
from malleable.model import JobKind
from malleable.workloads import swf, swf_plain
from malleable.workloads.swf import parse_swf, read_jobs, read_plain, read_swf
from tests.unit.test_swf_plain import line_path, read, write  # the same helpers

BASE = ["1", "0", "-1", "300", "4", "-1", "-1", "4", "600", "-1", "1", "7", "3", "-1", "-1",
        "-1", "-1", "-1"]
CATALOG = standard_catalog()
APPS = "; MalleableFormat: 1\n; MalleableApp: 1 ft\n; MalleableApp: 2 gadget2\n"


def line(kind: str = "2", low: str = "2", high: str = "16", preferred: str = "-1",
         app: str = "2", **changes: str) -> str:
    """A 23-field line; the first 18 fields changed by 1-based number: line(f4="-1")."""
    fields = list(BASE)
    for key, value in changes.items():
        fields[int(key[1:]) - 1] = value
    return " ".join([*fields, kind, low, high, preferred, app])


HEADERS = ["; MalleableApp: 1 ft", "; MalleableApp: 2 gadget2", "; MalleableApp: 3 fixed",
           "; MalleableApp: 4 nosuch", "; MalleableFormat: 2", "; note"]


@st.composite
def malleable_lines(draw: st.DrawFn, odd: bool) -> list[str]:
    """App headers first (or anywhere, when odd), then 23-field data lines: jobs
    ``JobSpec`` takes (or any mix of values, when odd)."""
    apps = ["; MalleableApp: 1 ft", "; MalleableApp: 2 gadget2", "; MalleableApp: 3 fixed"]
    named = draw(st.permutations(apps))[:draw(st.integers(0, 3))]
    codes = ["-1", *(h.split()[2] for h in named)]
    out = ["; MalleableFormat: 1", *named]
    for index in range(draw(st.integers(0, 20))):
        what = draw(st.sampled_from(["data"] * 8 + ["header", "blank"]))
        if what == "header":
            out.append(draw(st.sampled_from(HEADERS if odd else ["; note", ";"])))
            continue
        if what == "blank":
            out.append("")
            continue
        fields = _odd_job(draw) if odd else _good_job(draw, codes)
        fields.update({"f1": str(index + 1), "f2": str(draw(st.integers(0, 10**5)))})
        if odd and draw(st.integers(0, 9)) == 0:
            fields[draw(st.sampled_from(sorted(fields)))] = draw(st.sampled_from(
                ["x", "inf", "-0", "1e400", "2147483648", "7.5"]))
        text = line(**fields)
        if odd and draw(st.integers(0, 19)) == 0:
            text = " ".join(text.split()[:18])  # an 18-field line among 23-field ones
        out.append(text)
    return out


def _odd_job(draw: st.DrawFn) -> dict[str, str]:
    return {
        "f4": draw(st.sampled_from(["-1", "60", "0.5"])),
        "f5": draw(st.sampled_from(["-1", "2", "4"])),
        "f8": draw(st.sampled_from(["-1", "1", "2", "3", "4", "8"])),
        "kind": draw(st.sampled_from(["-1", "0", "1", "2", "3", "1.5"])),
        "low": draw(st.sampled_from(["-1", "1", "2", "4"])),
        "high": draw(st.sampled_from(["-1", "4", "8", "16"])),
        "preferred": draw(st.sampled_from(["-1", "2", "8", "32"])),
        "app": draw(st.sampled_from(["-1", "1", "2", "3", "4", "-2"])),
    }


def _good_job(draw: st.DrawFn, codes: list[str]) -> dict[str, str]:
    size = draw(st.sampled_from([1, 2, 4, 8]))  # powers of two: FT runs on them
    kind = draw(st.sampled_from(["-1", "0", "1", "2"]))
    if kind in ("-1", "0"):
        low, high = (draw(st.sampled_from(["-1", str(size)])) for _ in range(2))
    else:
        low = draw(st.sampled_from(["-1", "1", str(size)]))
        high = draw(st.sampled_from(["-1", str(size), "16"]))
    in_field_5 = draw(st.booleans())
    return {
        "f4": draw(st.sampled_from(["-1", "60", "0.5", "-0.0"])),
        "f5": str(size) if in_field_5 else draw(st.sampled_from(["-1", "3"])),
        "f8": "-1" if in_field_5 else str(size),
        "f9": draw(st.sampled_from(["-1", "900"])),
        "f12": draw(st.sampled_from(["-1", "0", "5"])),
        "kind": kind, "low": low, "high": high,
        "preferred": draw(st.sampled_from(["-1", str(size)])),
        "app": draw(st.sampled_from(codes)),
    }


BLOCKS = st.sampled_from([1, 37, 200, swf_plain.BLOCK_BYTES])
SLOW = [HealthCheck.too_slow, HealthCheck.function_scoped_fixture]


@settings(max_examples=200, deadline=None, suppress_health_check=SLOW)
@given(lines=malleable_lines(odd=True), block=BLOCKS)
def test_a_malleable_trace_reads_as_the_line_reader_reads_it(tmp_path: Path, lines: list[str],
                                                             block: int) -> None:
    text = "\n".join(lines) + "\n"
    path = write(tmp_path, text)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(swf_plain, "BLOCK_BYTES", block)
        assert read(path) == line_path(text, str(path))


@settings(max_examples=150, deadline=None, suppress_health_check=SLOW)
@given(lines=malleable_lines(odd=False), block=BLOCKS)
def test_a_good_malleable_trace_is_read_by_the_vectorized_reader(
        tmp_path: Path, lines: list[str], block: int) -> None:
    text = "\n".join(lines) + "\n"
    path = write(tmp_path, text)
    # the line reader's workload (read_swf would refuse one without jobs)
    expected = repr(parse_swf(text.splitlines(), str(path), CATALOG))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(swf_plain, "BLOCK_BYTES", block)
        workload = read_plain(path, CATALOG)
    assert workload is not None and repr(workload) == expected


def test_every_kind_size_and_application_is_made_as_the_line_reader_makes_it(
        tmp_path: Path) -> None:
    text = APPS + "; MalleableApp: 3 fixed\n" + "\n".join([
        line(),  # malleable gadget2, 2..16 from 4
        line("1", "-1", "8", "8", "1", f1="2", f8="-1", f5="2"),  # moldable ft, size field 5
        line("0", "-1", "-1", "-1", "-1", f1="3", f9="-1", f12="-1"),  # rigid fixed
        line("-1", "-1", "-1", "-1", "2", f1="4", f4="-1"),  # gadget2 without a run time
        line("2", "2", "16", "-1", "-1", f1="5", f4="-1"),  # fixed without one: skipped
        line("2", "2", "16", "-1", "3", f1="6", f4="-1"),  # named fixed without: skipped
        line("2", "2", "16", "-1", "1", f1="7", f8="-1", f5="-1"),  # no size: skipped
        line("2", "2", "16", "-1", "1", f1="7", f2="5.5", f4="-0.0"),  # number 7 again
    ]) + "\n"
    path = write(tmp_path, text)
    workload = read_plain(path, CATALOG)
    assert workload is not None and repr(workload) == line_path(text, str(path))
    assert workload.skipped == 3
    assert [j.kind for j in workload.jobs] == [JobKind.MALLEABLE, JobKind.MOLDABLE,
                                              JobKind.RIGID, JobKind.RIGID, JobKind.MALLEABLE]
    assert [j.app for j in workload.jobs] == ["gadget2", "ft", "fixed", "gadget2", "ft"]


BAD = [
    (line(kind="3"), "job kind 3 is not -1, 0, 1 or 2"),
    (line(kind="1.5"), "job kind 1 is not -1, 0, 1 or 2"),
    (line(app="5"), "application number 5 has no '; MalleableApp: 5 NAME' header line"),
    (line(app="1", f8="6"), "application ft runs on pow2 sizes only: initial size 6 is not one"),
    (line(low="8", high="4"), "minimum size 8 is above maximum size 4"),
    (line(low="1", high="2"), "initial size 4 is outside [1, 2]"),
    (line(kind="0", low="2", high="8"), "a rigid job needs minimum size == maximum size"),
    (line(preferred="32"), "preferred size 32 is outside [2, 16]"),
    (line(low="0"), "minimum size 0 (field 20) is outside"),
    (line(app="-2"), "negative application number -2 (field 23) is outside"),
    (line(high="x"), "field 21 is not a number: 'x'"),
    (" ".join(line().split()[:18]), ""),  # 18 fields after 23: a good file, line by line
]


@pytest.mark.parametrize(("bad", "message"), BAD)
def test_a_bad_line_gives_the_line_readers_message(tmp_path: Path, bad: str,
                                                   message: str) -> None:
    text = APPS + line(f1="10") + "\n" + bad + "\n" + line(f1="11") + "\n"
    path = write(tmp_path, text)
    got = read(path)
    assert got == line_path(text, str(path))
    if message:
        assert got.startswith(f"error: {path}:5: {message}")
    else:
        assert not got.startswith("error")
    assert read_plain(path, CATALOG) is None


def test_an_application_named_after_a_data_line_is_left_to_the_line_reader(
        tmp_path: Path) -> None:
    used_before = "; MalleableFormat: 1\n" + line(app="1") + "\n; MalleableApp: 1 ft\n"
    path = write(tmp_path, used_before)
    assert read(path) == line_path(used_before, str(path))
    assert read(path).startswith(f"error: {path}:2: application number 1 has no")
    named_later = APPS + line() + "\n; MalleableApp: 3 fixed\n" + line(f1="2") + "\n"
    path = write(tmp_path, named_later, "later.swf")
    assert read(path) == line_path(named_later, str(path))  # good, but read line by line
    assert read_plain(path, CATALOG) is None
    with pytest.MonkeyPatch.context() as patch:  # the same with the header in its own block
        patch.setattr(swf_plain, "BLOCK_BYTES", 1)
        assert read_plain(path, CATALOG) is None


def test_read_jobs_gives_a_malleable_trace_as_read_swf_does(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    text = APPS + "\n".join(line(f1=str(i), f2=str(100 - i), f4="-1" if i % 4 == 0 else "9",
                                 app="-1" if i % 2 == 0 else "2") for i in range(1, 13)) + "\n"
    path = write(tmp_path, text)
    with caplog.at_level(logging.WARNING, logger="malleable.workloads.swf"):
        jobs = read_jobs(path)
    assert [r.getMessage() for r in caplog.records] == [
        f"{path}: skipped 3 jobs with unknown run time or size"]
    assert isinstance(jobs, list) and repr(jobs) == repr(read_swf(path).jobs)
    assert len(jobs) == 9
    with pytest.MonkeyPatch.context() as patch:  # made 2 at a time: the same jobs
        patch.setattr(swf, "_MADE_AT_ONCE", 2)
        assert repr(read_jobs(path)) == repr(jobs)


def test_read_jobs_leaves_a_job_that_jobspec_refuses_to_read_swf(tmp_path: Path) -> None:
    path = write(tmp_path, APPS + line() + "\n" + line(f1="2", low="8", high="4") + "\n")
    assert swf_plain.read_table(path, CATALOG, swf._LIMITS, swf.header_line) is not None
    with pytest.raises(InputError, match=r"t.swf:5: minimum size 8 is above maximum size"):
        read_jobs(path)
