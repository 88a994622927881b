"""The spawn watchdog's setting (the watchdog itself runs under real mpirun in
tests/mpi/test_mpi_library.py)."""

from __future__ import annotations

import pytest

from malleable.mpi.session import SPAWN_TIMEOUT, spawn_timeout_setting


def test_the_argument_wins_over_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MALLEABLE_SPAWN_TIMEOUT", "30")
    assert spawn_timeout_setting(5) == 5
    assert spawn_timeout_setting() == 30


def test_default_and_zero(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MALLEABLE_SPAWN_TIMEOUT", raising=False)
    assert spawn_timeout_setting() == SPAWN_TIMEOUT == 120
    assert spawn_timeout_setting(0) is None  # no watchdog
    monkeypatch.setenv("MALLEABLE_SPAWN_TIMEOUT", " 0 ")
    assert spawn_timeout_setting() is None


@pytest.mark.parametrize(("env", "arg", "message"), [
    ("soon", None, "MALLEABLE_SPAWN_TIMEOUT='soon' is not a number of seconds"),
    ("-3", None, "spawn timeout -3.0 s is negative"),
    ("", -1.0, "spawn timeout -1.0 s is negative"),
])
def test_bad_settings_say_what_is_wrong(monkeypatch: pytest.MonkeyPatch, env: str,
                                        arg: float | None, message: str) -> None:
    monkeypatch.setenv("MALLEABLE_SPAWN_TIMEOUT", env)
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(".", r"\.")):
        spawn_timeout_setting(arg)
