"""Thin wrapper around the ``docker`` and compose command lines.

Every call is an argv list with a timeout (the child is killed on expiry); a failure
becomes an :class:`ExternalError` naming the command and the end of its stderr.
"""

from __future__ import annotations

import logging
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass

from malleable.errors import ExternalError

logger = logging.getLogger(__name__)

#: How much of a failed command's stderr goes into the error message.
STDERR_TAIL = 800


@dataclass(frozen=True, slots=True)
class Result:
    """What a command printed and how it exited."""

    argv: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str

    @property
    def ok(self) -> bool:
        return self.returncode == 0


def _tail(text: str) -> str:
    text = text.strip()
    return text if len(text) <= STDERR_TAIL else "..." + text[-STDERR_TAIL:]


class Docker:
    """The docker CLI (and compose, v2 plugin preferred over v1 ``docker-compose``)."""

    def __init__(self, docker: str = "docker") -> None:
        self.docker = docker
        self._compose: tuple[str, ...] | None = None

    def run(self, argv: Sequence[str], *, timeout: float, check: bool = True,
            input_text: str | None = None) -> Result:
        """Run ``argv``; raise ExternalError on a non-zero exit (when ``check``) or timeout."""
        args = tuple(argv)
        logger.debug("run %s", " ".join(args))
        try:
            proc = subprocess.run(args, capture_output=True, text=True, timeout=timeout,
                                  input=input_text, check=False)
        except subprocess.TimeoutExpired as exc:
            raise ExternalError(f"{' '.join(args[:4])} ... timed out after {timeout:g} s") from exc
        except FileNotFoundError as exc:
            raise ExternalError(f"{args[0]} is not installed (run .ci/testbed-setup.sh, or "
                                "apt-get install docker.io docker-compose)") from exc
        result = Result(args, proc.returncode, proc.stdout, proc.stderr)
        if check and not result.ok:
            raise ExternalError(f"{' '.join(args[:4])} ... failed with exit code "
                                f"{proc.returncode}: {_tail(proc.stderr) or _tail(proc.stdout)}")
        return result

    def docker_cmd(self, *args: str, timeout: float = 60, check: bool = True) -> Result:
        return self.run((self.docker, *args), timeout=timeout, check=check)

    def available(self) -> bool:
        """Whether a Docker engine answers."""
        if shutil.which(self.docker) is None:
            return False
        return self.docker_cmd("info", "--format", "{{.ServerVersion}}", timeout=20,
                               check=False).ok

    def require_engine(self) -> None:
        if not self.available():
            raise ExternalError("no Docker engine answers: start dockerd (bash "
                                ".ci/testbed-setup.sh installs and starts it)")

    def compose_command(self) -> tuple[str, ...]:
        """``docker compose`` (v2) when the plugin is there, else ``docker-compose`` (v1)."""
        if self._compose is None:
            if self.docker_cmd("compose", "version", timeout=20, check=False).ok:
                self._compose = (self.docker, "compose")
            elif shutil.which("docker-compose"):
                self._compose = ("docker-compose",)
            else:
                raise ExternalError("neither 'docker compose' nor 'docker-compose' is installed "
                                    "(apt-get install docker-compose)")
        return self._compose

    def compose(self, project: str, file: str, *args: str, timeout: float = 300,
                check: bool = True) -> Result:
        argv = (*self.compose_command(), "--project-name", project, "--file", file, *args)
        return self.run(argv, timeout=timeout, check=check)
