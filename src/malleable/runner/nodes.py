"""Commands and files on the compute nodes of a site, through its login host.

The runner reaches a site with one :class:`~malleable.adapters.shell.CommandRunner`
(SSH to the login node, or local); a node is one more hop, ``ssh -o BatchMode=yes
NODE COMMAND`` from there (the site's users reach their nodes by key, host keys
checked by the site's own known_hosts). Every command is an argv list, quoted
with :func:`shlex.join` for the remote shell.
"""

from __future__ import annotations

import json
import logging
import shlex
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from malleable.adapters.shell import CommandRunner, CommandTimeout, Result
from malleable.runner.private import WRITE_PRIVATE

logger = logging.getLogger(__name__)

#: A file written on a node: its directory made or checked private first.
_WRITE = WRITE_PRIVATE


@dataclass
class NodeShell:
    """Run commands on nodes (and on the login host itself with ``node=None``)."""

    runner: CommandRunner
    timeout: float = 30.0

    def run(self, node: str | None, argv: Sequence[str], *, input: str | None = None,
            check: bool = True, timeout: float | None = None) -> Result:
        command = list(argv) if node is None else [
            "ssh", "-o", "BatchMode=yes", node, shlex.join(argv)]
        return self.runner.run(command, timeout or self.timeout, input=input, check=check)

    def read(self, node: str, path: str) -> str | None:
        """A file's text, or None when it does not exist (yet) or could not be read in
        time (a loaded machine: the callers poll, so the next look decides)."""
        try:
            result = self.run(node, ["cat", path], check=False)
        except CommandTimeout as exc:
            logger.warning("reading %s on %s: %s", path, node, exc)
            return None
        return result.stdout if result.rc == 0 else None

    def read_json(self, node: str, path: str) -> dict[str, Any] | None:
        text = self.read(node, path)
        if text is None or not text.strip():
            return None
        data = json.loads(text)
        return data if isinstance(data, dict) else None

    def write(self, node: str, path: str, text: str) -> None:
        """Write a file atomically (temporary name, then rename)."""
        self.run(node, ["sh", "-c", _WRITE, "sh", path], input=text)

    def write_json(self, node: str, path: str, data: dict[str, Any]) -> None:
        self.write(node, path, json.dumps(data, sort_keys=True) + "\n")

    def hostnames(self, node_list: str) -> list[str]:
        """Expand a Slurm node list (``vu-n[001-003]``) with ``scontrol show hostnames``."""
        if not node_list or node_list == "(null)":
            return []
        out = self.run(None, ["scontrol", "show", "hostnames", node_list]).stdout
        return [line.strip() for line in out.splitlines() if line.strip()]

    def stage(self, node: str, path: str, text: str) -> str:
        """Copy a file to a node; return the node's host name (what MPI calls it)."""
        script = f'{_WRITE} && hostname'
        return self.run(node, ["sh", "-c", script, "sh", path], input=text).stdout.strip()

    def processes(self, node: str, needle: str) -> list[str]:
        """Command lines of processes on ``node`` that contain ``needle`` (ours excluded)."""
        result = self.run(node, ["ps", "-eo", "args="], check=False)
        return [line.strip() for line in result.stdout.splitlines()
                if needle in line and not line.lstrip().startswith(("ps ", "ssh ", "sh -c",
                                                                      "bash -c"))]
