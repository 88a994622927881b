"""The SWF reader's lean path (plain numeric lines) gives the general path's jobs and errors."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from malleable.errors import InputError
from malleable.workloads import swf
from malleable.workloads.swf import SwfWorkload, parse_swf, read_swf

PLAIN = "1 0 -1 300 4 -1 -1 4 450 -1 1 7 3 -1 -1 -1 -1 -1"
HEADER = ["; MalleableFormat: 1", "; MalleableApp: 1 ft"]
MALLEABLE = "2 60 -1 -1 2 -1 -1 2 -1 -1 -1 -1 -1 -1 -1 -1 -1 -1 2 2 32 -1 1"


def general(lines: list[str], monkeypatch: pytest.MonkeyPatch) -> SwfWorkload | str:
    with monkeypatch.context() as patch:
        patch.setattr(swf, "_plain_numbers", lambda fields, floats: None)
        return outcome(lines)


def outcome(lines: list[str]) -> SwfWorkload | str:
    try:
        return parse_swf(lines, "t.swf")
    except InputError as exc:
        return str(exc)


def variants() -> list[str]:
    """Lines that hit every branch: good, odd numbers, bad fields, wrong counts."""
    fields = PLAIN.split()
    odd = ["inf", "-inf", "nan", "NaN", "1e400", "x", "", "1_000", "0x10", "+7", "7.5", "-0",
           "1e308", "9" * 30, "²", "١٢", "--1", "5-3"]
    lines = [PLAIN, MALLEABLE, PLAIN + " 1", " ".join(fields[:17]), "\t" + PLAIN + " \r"]
    rng = random.Random(7)
    for value in odd:
        for index in (0, 1, 3, 4, 7, 8, 11, 17):
            copy = list(fields)
            copy[index] = value
            lines.append(" ".join(f for f in copy if f))
    for _ in range(200):
        copy = list(rng.choice((PLAIN, MALLEABLE)).split())
        copy[rng.randrange(len(copy))] = rng.choice([*odd, "-1", "0", "3", "1e308"])
        lines.append(" ".join(f for f in copy if f))
    return lines


def test_every_variant_reads_the_same_on_both_paths(monkeypatch: pytest.MonkeyPatch) -> None:
    checked = 0
    for line in variants():
        lines = [*HEADER, line]
        lean = outcome(lines)
        assert lean == general(lines, monkeypatch), line
        checked += isinstance(lean, str)
    assert checked > 50  # the variants do reach the errors


def test_a_generated_trace_reads_the_same_on_both_paths(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(3)
    lines = ["; Version: 2.2"] + [
        f"{n} {n * 7} -1 {rng.randint(-1, 9000)} {rng.choice((1, 2, 8))} -1 -1 "
        f"{rng.choice((-1, 4))} {rng.randint(-1, 20000)} -1 1 {rng.randint(-1, 5)} -1 -1 -1 -1 "
        "-1 -1" for n in range(1, 2000)]
    path = tmp_path / "t.swf"
    path.write_text("\n".join(lines) + "\n")
    lean = read_swf(path)
    assert lean == general(lines, monkeypatch) and len(lean.jobs) > 1000


def test_reading_a_file_splits_lines_as_splitlines_does(tmp_path: Path) -> None:
    text = f"; a\r\n{PLAIN}\r\n\x0c\n;b\x0b;c\n" + PLAIN.replace("1 0", "2 5", 1) + "\rnot a line"
    path = tmp_path / "t.swf"
    path.write_bytes(text.encode())
    with pytest.raises(InputError) as streamed:
        read_swf(path)
    with pytest.raises(InputError) as whole:
        parse_swf(text.splitlines(), str(path))
    assert str(streamed.value) == str(whole.value) and ":8:" in str(whole.value)


TOKENS = ["-1", "0", "-0", "1", "7.5", "+7", "1_000", "1e308", "1e400", "inf", "nan", "9" * 30,
          "١٢", "0x10", "x", ""]


def test_remembered_floats_are_floats_values_and_refusals() -> None:
    floats = swf._Floats()
    for _ in range(2):  # the second time from memory
        for token in TOKENS:
            try:
                expected: float | str = float(token)
            except ValueError as exc:
                expected = str(exc)
            try:
                got: float | str = floats[token]
            except ValueError as exc:
                got = str(exc)
            assert repr(got) == repr(expected), token  # -0.0 and nan included
    assert set(floats) == {t for t in TOKENS if t not in ("0x10", "x", "")}


def test_remembered_floats_start_afresh_when_full(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(swf, "FLOATS_KEPT", 3)
    floats = swf._Floats()
    values = [floats[str(n)] for n in range(10)]
    assert values == [float(n) for n in range(10)] and len(floats) <= 3


def test_a_trace_reads_the_same_when_the_floats_kept_churn(tmp_path: Path,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(5)
    lines = ["; MalleableFormat: 1", "; MalleableApp: 1 ft"] + [
        f"{n} {n * 3} -1 {rng.randint(-1, 900)} {rng.choice((2, 8))} -1 -1 "
        f"{rng.choice((-1, 4))} {rng.choice((-1, rng.randint(1, 2000)))} -1 1 "
        f"{rng.randint(-1, 5)} -1 -1 -1 -1 -1 -1 2 2 {rng.choice((8, 16, 32))} -1 "
        f"{rng.choice((-1, 1))}" for n in range(1, 3000)]
    whole = general(lines, monkeypatch)
    assert isinstance(whole, SwfWorkload) and len(whole.jobs) > 2000
    for kept in (1, 2, 50, swf.FLOATS_KEPT):
        monkeypatch.setattr(swf, "FLOATS_KEPT", kept)
        assert outcome(lines) == whole, kept
