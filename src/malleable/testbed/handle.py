"""What the bring-up and the accounts setup need of a testbed: the port
:class:`~malleable.testbed.runtime.Testbed` implements (typed against here, so that
``runtime`` may call ``bringup`` without the two importing each other)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol

from malleable.testbed.docker import Docker, Result
from malleable.testbed.info import Container, SiteEndpoint, TestbedStatus
from malleable.testbed.state import Record, StateDir

#: ``progress(phase, done, total)``: called while a long operation advances.
Progress = Callable[[str, int, int], None]


class TestbedHandle(Protocol):
    """A named testbed: its compose project, state directory, engine and commands."""

    name: str
    project: str
    state: StateDir
    docker: Docker

    def record(self) -> Record: ...

    def containers(self) -> list[Container]: ...

    def exec(self, target: str, argv: Sequence[str], *, user: str = "root",
             timeout: float = 60.0, check: bool = False, input_text: str | None = None,
             workdir: str | None = None) -> Result: ...

    def status(self) -> TestbedStatus: ...

    def config_toml(self) -> str: ...

    def rest_health(self, site: str, endpoint: SiteEndpoint | None) -> str: ...
