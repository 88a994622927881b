"""Issue 19: a command that fails leaves no empty --out directory behind, and a manager
run that could not reach a site says that the state it keeps is for a resume."""

from __future__ import annotations

from pathlib import Path

import pytest

from malleable.cli import main

BAD_SWF = "1 1e20 -1 300 4 -1 -1 4 600 -1 1 7 3 -1 -1 -1 -1 -1\n"


@pytest.mark.parametrize("argv", [
    ["simulate", "--workload", "{bad}", "--out", "{out}"],
    ["simulate", "--workload", "{empty}", "--out", "{out}"],
    ["simulate", "--platform", "0", "--out", "{out}"],
    ["experiment", "dmrlib", "--swf", "{bad}", "--quick", "--out", "{out}"],
    ["experiment", "dmrlib", "--swf", "{empty}", "--quick", "--out", "{out}"],
    ["experiment", "coorm", "--swf", "{bad}", "--quick", "--out", "{out}"],
    ["experiment", "coorm", "--quick", "--clusters", "x", "--out", "{out}"],
    ["experiment", "acds", "--jobs", "5:1:1", "--out", "{out}"],
    ["experiment", "koala", "--seeds", "0", "--out", "{out}"],
    ["experiment", "koala", "--background-trace", "{bad}", "--out", "{out}"],
    ["experiment", "elastic", "--trace", "{bad}", "--out", "{out}"],
    ["experiment", "elastic", "--trace", "{empty}", "--out", "{out}"],
    ["manager", "run", "--config", "{bad}", "--out", "{out}"],
])
def test_a_failed_command_leaves_no_empty_out_directory(
        argv: list[str], tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "bad.swf").write_text(BAD_SWF)
    (tmp_path / "empty.swf").write_text("; nothing\n")
    names = {"bad": tmp_path / "bad.swf", "empty": tmp_path / "empty.swf",
             "out": tmp_path / "a" / "b" / "out"}
    assert main([a.format(**names) for a in argv]) == 2
    assert capsys.readouterr().err.count("\n") == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.swf", "empty.swf"]


def test_an_existing_out_directory_is_kept(tmp_path: Path) -> None:
    (tmp_path / "bad.swf").write_text(BAD_SWF)
    out = tmp_path / "out"
    out.mkdir()
    assert main(["simulate", "--workload", str(tmp_path / "bad.swf"), "--out", str(out)]) == 2
    assert out.is_dir()


def test_an_unreachable_site_keeps_the_state_and_says_so(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    from malleable.errors import ExternalError

    def unreachable(*args: object, **kwargs: object) -> None:
        raise ExternalError("ssh u@127.0.0.1:1: cannot connect: connection refused")

    monkeypatch.setattr("malleable.service.open_run", unreachable)
    (tmp_path / "k").write_text("")
    (tmp_path / "kh").write_text("")
    config = tmp_path / "c.toml"
    config.write_text("[clusters.vu]\nhost = '127.0.0.1'\nport = 1\nuser = 'u'\nkey = 'k'\n"
                      "known_hosts = 'kh'\n")
    out = tmp_path / "run"
    assert main(["manager", "run", "--config", str(config), "--out", str(out)]) == 3
    err = capsys.readouterr().err.splitlines()
    assert err == [f"malleable: the run's state is kept in {out / 'state.sqlite'} (and its "
                   "directory): run the same command again to take the run up where it "
                   "stopped, or delete them to start afresh",
                   "malleable: error: ssh u@127.0.0.1:1: cannot connect: connection refused"]
    assert (out / "state.sqlite").is_file()
