"""The job's end of the application channel: a relay run as the job's user inside the job.

``malleable submit --mpi`` starts it in the batch script, next to ``mpirun``, on the
batch host (``python3 -m malleable.site.agent --service HOST:PORT --site S --job ID
--run-dir D``); on an OAR site, ``malleable submit --service`` of a job whose ``--max``
is above its ``--min`` starts it with ``--oar`` beside the user's command, on the base
job's first node. It connects to the site service over TCP and proves with MUNGE that it
runs as the job's owner (the protocol is in :mod:`malleable.site.channel`). Then it
carries out the service's requests on the run directory, as the user:

``read``   a file of the run directory (on the batch host or, by ``ssh``, on a node);
``write``  a file of the run directory, atomically (temporary name, then rename);
``stage``  copy the program from the batch host to a node's run directory; its host name;
``ps``     command lines of the run's processes on a node;
``extend``, ``release`` (OAR sites only, ``--oar``): extension jobs of this job, submitted
           and deleted as the user (:mod:`malleable.site.oaragent`).

With ``--oar`` the run directory is in the home the site's nodes share (OAR runs a job in
its submitter's directory), so ``read`` and ``write`` happen here whatever node the
service names, and ``stage`` only asks the node its host name (the program is already
there). An OAR job of ``malleable submit --mpi`` (``--oar --program P``) keeps the
runner's own ``nodes`` file: the agent does not write the size files then.

The run directory must be private to the user (:func:`~malleable.runner.private.check_private`:
owned by the user, mode 0700, not a symbolic link, its parent writable by no one else),
checked at start, and every file written on a node goes to a directory made or checked
the same way there; otherwise the agent refuses (one line, exit 2).
Paths outside the run directory are refused, so the service can never make the agent
touch anything else of the user's. When the connection drops (the service restarted),
the agent connects again and authenticates anew. It ends when the run does (the
batch script kills it, or ``ch/exit`` appears).
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import shlex
import socket
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from malleable.runner.private import WRITE_PRIVATE, NotPrivate, check_private
from malleable.site.oaragent import OarOps, start_files

logger = logging.getLogger("malleable.site.agent")

MAX_LINE = 1 << 20
"""Longest message either side accepts (bytes)."""
_WRITE = WRITE_PRIVATE


def payload(site: str, job: int, nonce: str) -> str:
    """What the agent signs with MUNGE: binds the credential to one job and one nonce."""
    return f"malleable-channel:{site}:{job}:{nonce}"


def send(sock: socket.socket, message: dict[str, Any]) -> None:
    sock.sendall(json.dumps(message, sort_keys=True).encode() + b"\n")


class LineReader:
    """JSON objects, one per line, from a socket (bounded length)."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buffer = b""

    def read(self) -> dict[str, Any] | None:
        """The next object; None at the end of the stream. ValueError if malformed."""
        while b"\n" not in self.buffer:
            if len(self.buffer) > MAX_LINE:
                raise ValueError("message too long")
            chunk = self.sock.recv(65536)
            if not chunk:
                return None
            self.buffer += chunk
        line, _, self.buffer = self.buffer.partition(b"\n")
        return self.decode(line)

    @staticmethod
    def decode(line: bytes) -> dict[str, Any]:
        """One message's line as an object; ValueError if it is not a JSON object."""
        data = json.loads(line)
        if not isinstance(data, dict):
            raise ValueError("a message must be a JSON object")
        return data


class Agent:
    """Serves the service's requests on one run directory (see the module docstring)."""

    def __init__(self, run_dir: str, program: str, here: str, python_ssh: Sequence[str] = ("ssh",
                 "-o", "BatchMode=yes"), oar: OarOps | None = None,
                 shared: bool = False) -> None:
        self.run_dir = os.path.normpath(run_dir)
        self.program = program
        self.here = here
        self.ssh = list(python_ssh)
        self.oar = oar
        self.shared = shared
        """The run directory is on a file system every node shares (OAR's homes)."""

    def inside(self, path: str) -> str:
        """``path`` if it lies in the run directory; ValueError otherwise."""
        norm = os.path.normpath(path)
        if not norm.startswith(self.run_dir + "/"):
            raise ValueError(f"{path!r} is outside the run directory")
        return norm

    def _remote(self, node: str, argv: Sequence[str], stdin: bytes | None = None
                ) -> subprocess.CompletedProcess[bytes]:
        command = list(argv) if node == self.here else [*self.ssh, node, shlex.join(argv)]
        return subprocess.run(command, input=stdin, capture_output=True, timeout=60,
                              check=False)

    def handle(self, request: dict[str, Any]) -> dict[str, Any]:
        """The reply to one request (errors are replies too)."""
        op, node = request.get("op"), str(request.get("node") or self.here)
        try:
            if op == "read":
                return {"text": self.read(node, self.inside(str(request["path"])))}
            if op == "write":
                self.write(node, self.inside(str(request["path"])), str(request["text"]))
                return {}
            if op == "stage":
                return {"text": self.stage(node)}
            if op == "ps":
                return {"lines": self.ps(node)}
            if self.oar is not None:
                reply = self.oar.handle(op, request)
                if reply is not None:
                    return reply
        except (KeyError, ValueError, OSError, subprocess.SubprocessError) as exc:
            return {"error": f"{type(exc).__name__}: {exc}"}
        return {"error": f"unknown op {op!r}"}

    def read(self, node: str, path: str) -> str | None:
        if node == self.here or self.shared:
            try:
                return Path(path).read_text()
            except FileNotFoundError:
                return None
        done = self._remote(node, ["cat", path])
        return done.stdout.decode() if done.returncode == 0 else None

    def write(self, node: str, path: str, text: str) -> None:
        node = self.here if self.shared else node
        done = self._remote(node, ["sh", "-c", _WRITE, "sh", path], text.encode())
        if done.returncode != 0:
            raise OSError(f"write {path} on {node}: {done.stderr.decode().strip()[:200]}")

    def stage(self, node: str) -> str:
        """Copy the program to ``node``'s run directory; the node's host name. A shared
        run directory already has it there: only the host name."""
        if self.shared:
            done = self._remote(node, ["hostname"])
            if done.returncode != 0:
                raise OSError(f"stage on {node}: {done.stderr.decode().strip()[:200]}")
            return done.stdout.decode().strip()
        path = f"{self.run_dir}/{self.program}"
        source = Path(path).read_bytes()
        done = self._remote(node, ["sh", "-c", f"{_WRITE} && hostname", "sh", path], source)
        if done.returncode != 0:
            raise OSError(f"stage on {node}: {done.stderr.decode().strip()[:200]}")
        return done.stdout.decode().strip()

    def ps(self, node: str) -> list[str]:
        done = self._remote(node, ["ps", "-eo", "args="])
        return [line.strip() for line in done.stdout.decode().splitlines()
                if self.run_dir in line and not line.lstrip().startswith(
                    ("ps ", "ssh ", "sh -c", "bash -c", "python3 -m malleable.site.agent"))]

    def last_seq(self) -> int:
        """The highest offer number of the run so far (a restarted service goes on after it)."""
        try:
            data = json.loads(Path(self.run_dir, "ch", "offer.json").read_text())
            return int(data.get("seq", 0))
        except (OSError, ValueError, AttributeError):
            return 0


def munge(text: str) -> str:
    """A MUNGE credential of this process's user carrying ``text``."""
    done = subprocess.run(["munge", "-s", text], capture_output=True, timeout=30, check=False)
    if done.returncode != 0:
        raise OSError(f"munge: {done.stderr.decode().strip()[:200]}")
    return done.stdout.decode().strip()


def session(agent: Agent, address: tuple[str, int], site: str, job: int,
            timeout: float = 600.0) -> bool:
    """One connection: authenticate, then serve until the service closes it.

    True when the service accepted us (worth reconnecting at once), False otherwise."""
    with socket.create_connection(address, timeout=30) as sock:
        reader = LineReader(sock)
        send(sock, {"hello": 1, "site": site, "job": job, "program": agent.program,
                    "run_dir": agent.run_dir, "node": agent.here, "seq": agent.last_seq()})
        challenge = reader.read()
        if challenge is None or "nonce" not in challenge:
            raise OSError(f"the service did not send a nonce: {challenge}")
        send(sock, {"cred": munge(payload(site, job, str(challenge["nonce"])))})
        sock.settimeout(timeout)  # the service verifies at its next cycle
        verdict = reader.read()
        if verdict is None or not verdict.get("ok"):
            logger.warning("the service refused the channel: %s",
                           (verdict or {}).get("error", "connection closed"))
            return False
        logger.info("channel open to %s:%d for job %d", address[0], address[1], job)
        sock.settimeout(None)
        while True:
            request = reader.read()
            if request is None:
                return True
            send(sock, {"id": request.get("id"), **agent.handle(request)})


def serve(agent: Agent, address: tuple[str, int], site: str, job: int) -> None:
    """Stay connected (reconnecting after a service restart) until the run ends."""
    delay = 1.0
    while not Path(agent.run_dir, "ch", "exit").exists():
        try:
            accepted = session(agent, address, site, job)
            delay = 1.0 if accepted else min(30.0, delay * 2)
        except (OSError, ValueError) as exc:
            logger.info("channel: %s; again in %.0f s", exc, delay)
            delay = min(10.0, delay * 1.5)
        time.sleep(delay)


def parse_address(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"service address {text!r}: use HOST:PORT")
    return host, int(port)


def main(argv: Sequence[str] | None = None) -> int:
    parser = parser_of()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="malleable-agent: %(message)s")
    try:
        agent = build(args)
        check_private(agent.run_dir)
    except NotPrivate as exc:
        logger.error("refused: the run directory is not private: %s", exc)
        return 2
    serve(agent, parse_address(args.service), args.site, args.job)
    return 0


def parser_of() -> argparse.ArgumentParser:
    """The agent's command line."""
    parser = argparse.ArgumentParser(prog="python3 -m malleable.site.agent",
                                     description="the job's end of the application channel")
    parser.add_argument("--service", required=True, help="the service's channel HOST:PORT")
    parser.add_argument("--site", required=True)
    parser.add_argument("--job", type=int, required=True)
    parser.add_argument("--run-dir", required=True)
    parser.add_argument("--program", default="")
    parser.add_argument("--oar", action="store_true",
                        help="an OAR job: serve extend and release, keep the size files")
    return parser


def build(args: argparse.Namespace) -> Agent:
    """The agent of the command line's options (on OAR, the size files written first,
    unless the job is an ``--mpi`` one: its runner writes the nodes file)."""
    oar = None
    if args.oar:
        oar = OarOps(args.job)
        if not args.program:
            start_files(args.run_dir)
    return Agent(args.run_dir, args.program, os.environ.get("SLURMD_NODENAME")
                 or socket.gethostname(), oar=oar, shared=args.oar)


if __name__ == "__main__":
    raise SystemExit(main())
