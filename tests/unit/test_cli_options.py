"""Command-line values refused at parse time with one usage line and exit code 2."""

from __future__ import annotations

from pathlib import Path

import pytest

from malleable.cli import main

COMMANDS = [
    ["simulate"],
    ["manager", "run", "--config", "c.toml"],
    ["experiment", "koala", "--out", "o"],
    ["experiment", "dmrlib", "--out", "o"],
    ["experiment", "acds", "--out", "o"],
    ["experiment", "coorm", "--out", "o"],
]


def _seed_commands() -> list[list[str]]:
    return [c for c in COMMANDS if c[:2] != ["experiment", "koala"]]


@pytest.mark.parametrize("command", _seed_commands())
@pytest.mark.parametrize(("value", "message"), [
    ("-1", "argument --seed: -1 is negative: a seed is a whole number >= 0"),
    ("-7", "-7 is negative"),
    ("1.5", "'1.5' is not a whole number"),
    ("x", "'x' is not a whole number"),
    ("", "'' is not a whole number"),
])
def test_a_bad_seed_is_refused(command: list[str], value: str, message: str, tmp_path: Path,
                               capsys: pytest.CaptureFixture[str],
                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as info:
        main([*command, f"--seed={value}"])
    assert info.value.code == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1 and "Traceback" not in err
    assert list(tmp_path.iterdir()) == []


def test_seed_zero_is_a_seed(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", "--seed", "0", "--json", "--platform", "64"]) == 0
    assert '"seed": 0' in capsys.readouterr().out
