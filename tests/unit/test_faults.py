"""The test-only kill hook: MALLEABLE_KILL_AT=BOUNDARY:N SIGKILLs at the N-th arrival."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from malleable import faults

SRC = str(Path(__file__).resolve().parents[2] / "src")
SCRIPT = ("from malleable import faults\n"
          "for i in range(3):\n"
          "    faults.reached('submit.before')\n"
          "    print('passed', i, flush=True)\n")


def _run(kill_at: str) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=SRC, MALLEABLE_KILL_AT=kill_at)
    return subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True,
                          env=env, timeout=60)


def test_killed_by_sigkill_at_the_nth_arrival() -> None:
    done = _run("submit.before:2")
    assert done.returncode == -signal.SIGKILL
    assert done.stdout.split("\n")[:-1] == ["passed 0"]
    assert "killed at submit.before:2" in done.stderr


def test_other_boundaries_and_no_setting_do_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    assert _run("cancel.after:1").stdout.count("passed") == 3
    monkeypatch.delenv(faults.ENV, raising=False)
    faults.reached("submit.before")  # unset: nothing happens


def test_an_unknown_boundary_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(faults.ENV, "submit.sideways:1")
    with pytest.raises(ValueError, match=r"unknown boundary; valid: submit\.before"):
        faults.reached("submit.before")
