"""The docker CLI wrapper: timeouts kill the child, failures name the command, compose choice."""

from __future__ import annotations

import time
from collections.abc import Sequence

import pytest

from malleable.errors import ExternalError
from malleable.testbed.docker import Docker, Result


def test_timeout_kills_the_child_and_says_so() -> None:
    start = time.monotonic()
    with pytest.raises(ExternalError, match=r"timed out after 0\.2 s"):
        Docker().run(["sleep", "5"], timeout=0.2)
    assert time.monotonic() - start < 3


def test_failure_names_the_command_and_its_stderr() -> None:
    with pytest.raises(ExternalError, match=r"sh -c echo boom.*exit code 3: boom"):
        Docker().run(["sh", "-c", "echo boom >&2; exit 3", "x"], timeout=5)
    result = Docker().run(["sh", "-c", "echo out; exit 1"], timeout=5, check=False)
    assert (result.ok, result.returncode, result.stdout) == (False, 1, "out\n")


def test_input_is_passed_to_the_child() -> None:
    assert Docker().run(["cat"], timeout=5, input_text="hello").stdout == "hello"


class _Compose(Docker):
    def __init__(self, v2: bool) -> None:
        super().__init__()
        self.v2 = v2

    def run(self, argv: Sequence[str], *, timeout: float, check: bool = True,
            input_text: str | None = None) -> Result:
        ok = self.v2 or tuple(argv[1:3]) != ("compose", "version")
        return Result(tuple(argv), 0 if ok else 1, "", "")


def test_compose_v2_is_preferred() -> None:
    docker = _Compose(v2=True)
    assert docker.compose_command() == ("docker", "compose")
    docker.compose("p", "f.yml", "up")  # cached: no second detection
    assert docker.compose_command() == ("docker", "compose")


def test_compose_v1_when_no_plugin(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("shutil.which", lambda name: f"/usr/bin/{name}")
    assert _Compose(v2=False).compose_command() == ("docker-compose",)
    monkeypatch.setattr("shutil.which", lambda name: None)
    with pytest.raises(ExternalError, match="apt-get install docker-compose"):
        _Compose(v2=False).compose_command()
