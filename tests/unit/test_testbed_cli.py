"""``malleable testbed``: help, and bad input rejected with one line and exit code 2."""

from __future__ import annotations

from pathlib import Path

import pytest

from malleable.cli import main


@pytest.fixture(autouse=True)
def _state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MALLEABLE_TESTBED_STATE", str(tmp_path / "state"))


@pytest.mark.parametrize("action", ["up", "status", "exec", "config", "down", "list", "build"])
def test_every_action_has_help(action: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as info:
        main(["testbed", action, "--help"])
    assert info.value.code == 0
    assert "usage: malleable testbed " + action in capsys.readouterr().out


@pytest.mark.parametrize(("argv", "message"), [
    (["up", "--topology", "nowhere.toml"], "neither a built-in"),
    (["up", "--topology", "small", "--scale", "2"], "--scale must be in (0, 1]"),
    (["up", "--topology", "small", "--timeout", "0"], "--timeout must be a positive"),
    (["up", "--topology", "small", "--name", "Bad Name"], "bad testbed name"),
    (["status", "--name", "absent"], "no testbed named 'absent' is up"),
    (["config", "--name", "absent"], "no testbed named 'absent' is up"),
    (["exec", "--name", "absent", "vu", "--"], "no command given"),
    (["up", "--topology", "small", "--slurm", "23.02"],
     "unsupported Slurm version '23.02': choose one of 22.05, 24.11, 26.05"),
    (["build", "--slurm", "25"], "unsupported Slurm version '25'"),
    (["up", "--topology", "das3-mixed", "--slurm", "24.11"],
     "the Slurm 24.11 image carries no OAR"),
])
def test_bad_input_is_one_line_and_exit_2(argv: list[str], message: str,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["testbed", *argv]) == 2
    err = capsys.readouterr().err
    assert message in err
    assert err.count("\n") == 1 and "Traceback" not in err


def test_bad_topology_file_names_the_file(tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "t.toml"
    path.write_text("[sites.a]\nnodes = 'many'\n")
    assert main(["testbed", "up", "--topology", str(path)]) == 2
    assert f"{path}: [sites.a] nodes must be an integer" in capsys.readouterr().err


@pytest.mark.parametrize("name", ["nosuch", "default", "t1"])
def test_down_of_a_testbed_that_does_not_exist_claims_nothing(
        name: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    import malleable.commands.testbed as command
    from malleable.testbed.runtime import Testbed

    monkeypatch.setattr(Testbed, "containers", lambda self: [])
    monkeypatch.setattr(command, "list_testbeds", lambda docker=None: {"other": {}})
    monkeypatch.setattr(Testbed, "down", lambda self, **kw: pytest.fail("down was called"))
    assert main(["testbed", "down", "--name", name]) == 2
    captured = capsys.readouterr()
    assert "removed" not in captured.out + captured.err
    assert captured.err == (f"malleable: error: no testbed named {name!r}: nothing to take down"
                            " (testbeds with containers here: other)\n")


def test_down_of_a_testbed_with_state_takes_it_down(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    from malleable.testbed.runtime import Testbed

    (tmp_path / "state" / "half").mkdir(parents=True)
    monkeypatch.setattr(Testbed, "containers", lambda self: [])
    taken: list[str] = []
    monkeypatch.setattr(Testbed, "down", lambda self, **kw: taken.append(self.name))
    assert main(["testbed", "down", "--name", "half"]) == 0
    assert taken == ["half"] and "testbed half removed" in capsys.readouterr().out
