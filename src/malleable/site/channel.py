"""The service's end of the application channel: a TCP socket, MUNGE-authenticated per job.

A ``--mpi`` job's agent (:mod:`malleable.site.agent`, run as the job's user inside
the job) connects to ``[service] channel = "HOST:PORT"``:

1. agent -> service ``{"hello": 1, "site": S, "job": SLURMID, "program", "run_dir",
   "node", "seq"}``;
2. service -> agent ``{"nonce": N}`` (random, fresh for this connection);
3. agent -> service ``{"cred": C}``, ``C`` = ``munge -s "malleable-channel:S:SLURMID:N"``;
4. at its next cycle the service decodes ``C`` with ``unmunge`` on site ``S`` (the
   site's munge key: a credential made on any of its hosts decodes there; munged
   refuses a replayed one) and accepts only when the payload is exactly that string and
   the credential's user is the job's owner *as Slurm (or OAR) reports it* and the job is
   a tagged ``--mpi`` job (on OAR: a tagged malleable job, whose agent grows and shrinks
   it, :mod:`malleable.site.oaragent`): ``{"ok": true}``; else ``{"error": ...}``, one log line
   (``event=channel_refused``) and the connection is closed;
5. then the service sends requests (``{"id", "op", ...}``, see the agent) and the agent
   answers each (``{"id", ...}``).

Nothing is shared between the user and the service but this socket: no directory, no
key, no token kept anywhere. Bob can connect and claim alice's job, but his credential
says ``bob``: refused. See docs/site.md, "The application channel", for the threat model.

Verification and every request run on the service's main thread (the cycle), so the
site's command runner is never used from two threads; the accept thread only reads the
hello and the credential.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import queue
import re
import secrets
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from malleable.adapters.shell import CommandRunner, Result
from malleable.runner.nodes import NodeShell
from malleable.site.agent import LineReader, payload, send

logger = logging.getLogger(__name__)

_FIELD = re.compile(r"^([A-Z_]+):\s*(.*)$")
_UID = re.compile(r"^(\S+) \((\d+)\)$")


class ChannelError(Exception):
    """The agent did not answer, or answered with an error."""


class NotNow(Exception):
    """The owner of a job cannot be told this cycle (its site did not answer the poll)."""


@dataclass(frozen=True, slots=True)
class Decoded:
    """What ``unmunge`` says of a credential."""

    ok: bool
    user: str
    payload: str
    status: str


def parse_unmunge(text: str) -> Decoded:
    """``unmunge``'s output: the metadata lines, an empty line, then the payload."""
    head, _, body = text.partition("\n\n")
    fields: dict[str, str] = {}
    for line in head.splitlines():
        match = _FIELD.match(line.strip())
        if match:
            fields[match.group(1)] = match.group(2).strip()
    status = fields.get("STATUS", "")
    uid = _UID.match(fields.get("UID", ""))
    return Decoded(status.startswith("Success"), uid.group(1) if uid else "", body, status)


def unmunge(runner: CommandRunner, credential: str, timeout: float = 30.0) -> Decoded:
    """Decode a credential on the site (``unmunge``, the credential on stdin)."""
    result = runner.run(["unmunge"], timeout, check=False, input=credential + "\n")
    decoded = parse_unmunge(result.stdout)
    if result.rc != 0 and decoded.ok:
        return Decoded(False, decoded.user, decoded.payload, f"unmunge exit {result.rc}")
    if result.rc != 0 and not decoded.status:
        return Decoded(False, "", "", (result.stderr.strip().splitlines() or ["failed"])[-1])
    return decoded


@dataclass
class Session:
    """An authenticated agent: requests go out and replies come back, one at a time."""

    site: str
    job: int
    user: str
    program: str
    run_dir: str
    node: str
    seq: int
    sock: socket.socket
    reader: LineReader
    timeout: float = 60.0
    _next: int = 0
    closed: bool = False

    def call(self, op: str, **args: Any) -> dict[str, Any]:
        """One request and its reply; ChannelError when the agent is gone or failed."""
        if self.closed:
            raise ChannelError(f"the channel of job {self.job} is closed")
        self._next += 1
        try:
            self.sock.settimeout(self.timeout)
            send(self.sock, {"id": self._next, "op": op, **args})
            reply = self.reader.read()
        except (OSError, ValueError) as exc:
            self.close()
            raise ChannelError(f"job {self.job}: {exc}") from None
        if reply is None or reply.get("id") != self._next:
            self.close()
            raise ChannelError(f"job {self.job}: the agent closed the channel")
        if "error" in reply:
            raise ChannelError(f"job {self.job}: {reply['error']}")
        return reply

    def close(self) -> None:
        self.closed = True
        with contextlib.suppress(OSError):
            self.sock.close()


@dataclass
class Registration:
    """A connection that said hello and sent a credential, waiting to be verified."""

    hello: dict[str, Any]
    nonce: str
    credential: str
    sock: socket.socket
    reader: LineReader
    peer: str
    since: float = field(default_factory=time.monotonic)

    @property
    def site(self) -> str:
        return str(self.hello.get("site", ""))

    @property
    def job(self) -> int:
        value = self.hello.get("job")
        return value if isinstance(value, int) and value > 0 else 0


Owner = Callable[[str, int], "tuple[str, bool] | None"]
"""(site, Slurm or OAR id) -> (owner, whether the tagged job runs an agent: ``--mpi`` on
Slurm, a malleable job on OAR), None if unknown;
:class:`NotNow` when the site's queue is not known this cycle."""
Verifier = Callable[[str, str], Decoded]
"""(site, credential) -> what unmunge says on that site."""


def native_key(site: str) -> str:
    """The log field of a job's id on a site whose kind is not known (a site the service
    does not have): ``native_id``."""
    return "native_id"


@dataclass
class ChannelServer:
    """The listening socket and the authenticated sessions (see the module docstring)."""

    host: str
    port: int
    handshake_timeout: float = 10.0
    patience: float = 120.0
    """Seconds a registration may wait for its site to answer a poll before refusal."""
    sessions: dict[tuple[str, int], Session] = field(default_factory=dict)
    refused: int = 0
    id_key: Callable[[str], str] = native_key
    """site -> the log field of a job's id there (``slurm_id``, ``oar_id``: the service
    sets it from its sites)."""
    _queue: queue.Queue[Registration] = field(default_factory=queue.Queue)
    _listener: socket.socket | None = None
    _thread: threading.Thread | None = None

    def start(self, patience: float = 15.0) -> tuple[str, int]:
        """Listen (port 0: any free port); the address bound.

        Connections of a previous run of the service may hold the port for a moment
        after it stopped (their agents have not closed yet): tried again for up to
        ``patience`` seconds."""
        deadline = time.monotonic() + patience
        while True:
            try:
                listener = socket.create_server((self.host, self.port))
                break
            except OSError as exc:
                if exc.errno != errno.EADDRINUSE or time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
        listener.settimeout(0.5)
        self._listener = listener
        self.port = listener.getsockname()[1]
        self._thread = threading.Thread(target=self._accept, name="channel", daemon=True)
        self._thread.start()
        logger.info("event=channel_listening address=%s:%d", self.host, self.port)
        return self.host, self.port

    def _accept(self) -> None:
        while self._listener is not None:
            try:
                sock, peer = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            threading.Thread(target=self._handshake, args=(sock, f"{peer[0]}:{peer[1]}"),
                             daemon=True).start()

    def _handshake(self, sock: socket.socket, peer: str) -> None:
        reader = LineReader(sock)
        try:
            sock.settimeout(self.handshake_timeout)
            hello = reader.read()
            if hello is None or hello.get("hello") != 1:
                raise ValueError(f"not a hello: {hello!r}"[:200])
            nonce = secrets.token_hex(16)
            send(sock, {"nonce": nonce})
            cred = reader.read()
            if cred is None or not isinstance(cred.get("cred"), str):
                raise ValueError("no credential")
        except (OSError, ValueError) as exc:
            logger.info("event=channel_dropped peer=%s reason=%r", peer, str(exc)[:200])
            sock.close()
            return
        self._queue.put(Registration(hello, nonce, cred["cred"], sock, reader, peer))

    def settle(self, owner: Owner, verify: Verifier) -> None:
        """Verify the registrations waiting (on the caller's thread); drop dead sessions."""
        later: list[Registration] = []
        while True:
            try:
                reg = self._queue.get_nowait()
            except queue.Empty:
                break
            try:
                self._verify(reg, owner, verify)
            except NotNow:
                if time.monotonic() - reg.since < self.patience:
                    later.append(reg)
                else:
                    self._refuse(reg, Decoded(False, "", "", ""), "its site did not answer")
        for reg in later:
            self._queue.put(reg)
        for key in [k for k, s in self.sessions.items() if s.closed]:
            del self.sessions[key]

    def _verify(self, reg: Registration, owner: Owner, verify: Verifier) -> None:
        site, job = reg.site, reg.job
        known = owner(site, job) if job else None
        reason = ""
        decoded = Decoded(False, "", "", "")
        if known is None:
            reason = f"no tagged job {job} on site {site!r}"
        elif not known[1]:
            reason = (f"job {job} was not submitted with --mpi (Slurm) or with a size range "
                      "(OAR): it has no agent")
        else:
            decoded = verify(site, reg.credential)
            if not decoded.ok:
                reason = f"credential refused by unmunge: {decoded.status}"
            elif decoded.payload != payload(site, job, reg.nonce):
                reason = "the credential is not for this job and nonce"
            elif decoded.user != known[0]:
                reason = f"{decoded.user} is not the owner of job {job} ({known[0]})"
        if reason:
            self._refuse(reg, decoded, reason)
            return
        old = self.sessions.get((site, job))
        if old is not None:
            old.close()
        try:
            send(reg.sock, {"ok": True})
        except OSError:
            reg.sock.close()
            return
        hello = reg.hello
        self.sessions[(site, job)] = Session(
            site, job, decoded.user, str(hello.get("program", "")),
            str(hello.get("run_dir", "")), str(hello.get("node", "")),
            int(hello.get("seq", 0)) if isinstance(hello.get("seq"), int) else 0,
            reg.sock, reg.reader)
        logger.info("event=channel_open site=%s %s=%d user=%s peer=%s", site,
                    self.id_key(site), job, decoded.user, reg.peer)

    def _refuse(self, reg: Registration, decoded: Decoded, reason: str) -> None:
        self.refused += 1
        logger.warning("event=channel_refused site=%s %s=%s peer=%s user=%s reason=%r",
                       reg.site, self.id_key(reg.site), reg.job, reg.peer,
                       decoded.user or "?", reason)
        with contextlib.suppress(OSError):
            send(reg.sock, {"ok": False, "error": reason})
        reg.sock.close()

    def session(self, site: str, job: int) -> Session | None:
        found = self.sessions.get((site, job))
        return None if found is None or found.closed else found

    def close(self) -> None:
        listener, self._listener = self._listener, None
        if listener is not None:
            listener.close()
        for sess in self.sessions.values():
            sess.close()
        self.sessions.clear()


@dataclass
class RelayShell(NodeShell):
    """A :class:`~malleable.runner.nodes.NodeShell` whose file and node operations go
    through the job's agent (as the job's user); Slurm commands (``node=None``) run on
    the service's own runner, as the operator."""

    session: Session | None = None

    def _agent(self) -> Session:
        if self.session is None or self.session.closed:
            raise ChannelError("the job's channel is not open")
        return self.session

    def run(self, node: str | None, argv: Any, *, input: str | None = None,
            check: bool = True, timeout: float | None = None) -> Result:
        if node is not None:
            raise ChannelError("the service runs no command on a user's node")
        return super().run(None, argv, input=input, check=check, timeout=timeout)

    def read(self, node: str, path: str) -> str | None:
        text = self._agent().call("read", node=node, path=path).get("text")
        return text if isinstance(text, str) else None

    def write(self, node: str, path: str, text: str) -> None:
        self._agent().call("write", node=node, path=path, text=text)

    def stage(self, node: str, path: str, text: str) -> str:
        """The agent copies the program it has (``text`` is not sent)."""
        return str(self._agent().call("stage", node=node).get("text", "")).strip() or node

    def processes(self, node: str, needle: str) -> list[str]:
        lines = self._agent().call("ps", node=node).get("lines", [])
        return [str(line) for line in lines if needle in str(line)]
