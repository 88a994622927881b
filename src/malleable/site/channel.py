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

Bounded against a hostile local user (docs/security.md): connections are accepted and
their handshakes read by one thread with :mod:`selectors`, under caps on connections (in
all and per address) and a handshake deadline (:mod:`malleable.site.gate`); the job's
owner is looked up on the service's main thread (the cycle), and ``unmunge`` runs on
one checking thread fed by a bounded queue, rate-limited per address, so a storm of bad
credentials never holds up a cycle. Refusals past the first few of a period and dropped
connections are logged as one summary line per period (``event=channel_dropped``).
Sessions and their requests stay on the main thread.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import queue
import re
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from malleable.adapters.shell import CommandRunner, Result
from malleable.errors import ExternalError
from malleable.runner.nodes import NodeShell
from malleable.site.agent import LineReader, payload, send
from malleable.site.gate import Gate, Limits, Registration, Tally

__all__ = ["ChannelError", "ChannelServer", "Decoded", "Limits", "NotNow", "Registration",
           "RelayShell", "Session", "native_key", "parse_unmunge", "unmunge"]

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
    """Decode a credential on the site (``unmunge``, the credential on stdin); a runner
    that cannot run it (a REST site's) gives a refusal saying why."""
    try:
        result = runner.run(["unmunge"], timeout, check=False, input=credential + "\n")
    except ExternalError as exc:
        return Decoded(False, "", "", str(exc))
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
    limits: Limits = field(default_factory=Limits)
    sessions: dict[tuple[str, int], Session] = field(default_factory=dict)
    refused: int = 0
    id_key: Callable[[str], str] = native_key
    """site -> the log field of a job's id there (``slurm_id``, ``oar_id``: the service
    sets it from its sites)."""
    _gate: Gate | None = None
    _waiting: list[Registration] = field(default_factory=list)
    _checks: queue.Queue[tuple[Registration, str] | None] | None = None
    _checked: queue.Queue[tuple[Registration, str, Decoded]] = field(
        default_factory=queue.Queue)
    _verify: Verifier | None = None
    _worker: threading.Thread | None = None
    _tally: Tally | None = None
    _detailed: list[float] = field(default_factory=list)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        if self.handshake_timeout != self.limits.handshake:
            self.limits = replace(self.limits, handshake=self.handshake_timeout)
        self._tally = Tally(self.limits.summary)
        self._checks = queue.Queue(maxsize=self.limits.queue)

    @property
    def tally(self) -> Tally:
        assert self._tally is not None  # made in __post_init__
        return self._tally

    def start(self, patience: float = 15.0) -> tuple[str, int]:
        """Listen (port 0: any free port); the address bound.

        Connections of a previous run of the service may hold the port for a moment
        after it stopped (their agents have not closed yet): tried again for up to
        ``patience`` seconds."""
        deadline = time.monotonic() + patience
        while True:
            try:
                listener = socket.create_server((self.host, self.port), backlog=128)
                break
            except OSError as exc:
                if exc.errno != errno.EADDRINUSE or time.monotonic() > deadline:
                    raise
                time.sleep(0.5)
        self.port = listener.getsockname()[1]
        self._gate = Gate(listener, self.limits, self.tally, _tell_refused)
        self._gate.start()
        logger.info("event=channel_listening address=%s:%d", self.host, self.port)
        return self.host, self.port

    @property
    def open_handshakes(self) -> int:
        """Connections in their handshake now (for tests and the benchmark)."""
        return len(self._gate.open) if self._gate is not None else 0

    def settle(self, owner: Owner, verify: Verifier) -> None:
        """On the caller's thread (the cycle): look up the registrations' jobs, hand their
        credentials to the checking thread (bounded queue, rate-limited per address),
        open the sessions of those it accepted; drop dead sessions. Never waits for
        ``unmunge``."""
        self._verify = verify
        self._start_worker()
        fresh: list[Registration] = []
        if self._gate is not None:
            with contextlib.suppress(queue.Empty):
                while True:
                    fresh.append(self._gate.ready.get_nowait())
        waiting, self._waiting = [*self._waiting, *fresh], []
        for reg in waiting:
            self._look_up(reg, owner)
        with contextlib.suppress(queue.Empty):
            while True:
                self._conclude(*self._checked.get_nowait())
        for key in [k for k, s in self.sessions.items() if s.closed]:
            del self.sessions[key]
        self.tally.flush()

    def _start_worker(self) -> None:
        if self._worker is None or not self._worker.is_alive():
            self._worker = threading.Thread(target=self._work, name="channel-verify",
                                            daemon=True)
            self._worker.start()

    def _work(self) -> None:
        """The checking thread: ``unmunge`` each queued credential, one at a time."""
        assert self._checks is not None
        while True:
            item = self._checks.get()
            if item is None:
                return
            reg, known = item
            verify = self._verify
            try:
                decoded = verify(reg.site, reg.credential) if verify else \
                    Decoded(False, "", "", "no verifier")
            except Exception as exc:  # a failed check is a refusal, never the thread's end
                decoded = Decoded(False, "", "", f"{type(exc).__name__}: {str(exc)[:200]}")
            reason = _judge(reg, known, decoded)
            if reason:  # answered at once; only an accepted one waits for the cycle
                self._refuse(reg, decoded, reason)
            else:
                self._checked.put((reg, known, decoded))

    def _look_up(self, reg: Registration, owner: Owner) -> None:
        site, job = reg.site, reg.job
        try:
            known = owner(site, job) if job else None
        except NotNow:
            if time.monotonic() - reg.since < self.patience \
                    and len(self._waiting) < self.limits.queue:
                self._waiting.append(reg)
            else:
                self._refuse(reg, Decoded(False, "", "", ""), "its site did not answer")
            return
        if known is None:
            self._refuse(reg, Decoded(False, "", "", ""), f"no tagged job {job} on site {site!r}")
        elif not known[1]:
            self._refuse(reg, Decoded(False, "", "", ""),
                         f"job {job} was not submitted with --mpi (Slurm) or with a size "
                         "range (OAR): it has no agent")
        else:
            assert self._checks is not None
            try:
                self._checks.put_nowait((reg, known[0]))
            except queue.Full:
                self._refuse(reg, Decoded(False, "", "", ""), "the service is busy: try "
                             "again later", tally="busy")

    def _conclude(self, reg: Registration, owner: str, decoded: Decoded) -> None:
        """Open the session of an accepted registration (the cycle's thread)."""
        site, job = reg.site, reg.job
        reason = _judge(reg, owner, decoded)
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

    def _refuse(self, reg: Registration, decoded: Decoded, reason: str,
                tally: str = "refused") -> None:
        """Refuse (the reason sent); one log line each for the first ones of a period,
        then a count in the period's summary line (a storm logs one line)."""
        with self._lock:
            self.refused += 1
            now = time.monotonic()
            self._detailed = [t for t in self._detailed if now - t < self.limits.summary]
            detailed = tally == "refused" and len(self._detailed) < DETAILED_REFUSALS
            if detailed:
                self._detailed.append(now)
        if detailed:
            logger.warning("event=channel_refused site=%s %s=%s peer=%s user=%s reason=%r",
                           reg.site, self.id_key(reg.site), reg.job, reg.peer,
                           decoded.user or "?", reason)
        else:
            self.tally.add(tally)
        _tell_refused(reg.sock, reason)

    def session(self, site: str, job: int) -> Session | None:
        found = self.sessions.get((site, job))
        return None if found is None or found.closed else found

    def close(self) -> None:
        gate, self._gate = self._gate, None
        if gate is not None:
            gate.stop()
            with contextlib.suppress(OSError):
                gate.listener.close()
        if self._checks is not None:
            with contextlib.suppress(queue.Full):
                self._checks.put_nowait(None)
        for reg in self._waiting:
            reg.sock.close()
        self._waiting.clear()
        for sess in self.sessions.values():
            sess.close()
        self.sessions.clear()
        self.tally.flush(force=True)


def _judge(reg: Registration, owner: str, decoded: Decoded) -> str:
    """Why a checked credential is refused ("" when it is the job owner's, for this job
    and this connection's nonce)."""
    if not decoded.ok:
        return f"credential refused by unmunge: {decoded.status}"
    if decoded.payload != payload(reg.site, reg.job, reg.nonce):
        return "the credential is not for this job and nonce"
    if decoded.user != owner:
        return f"{decoded.user} is not the owner of job {reg.job} ({owner})"
    return ""


#: Refusals logged one line each per summary period; the rest are counted.
DETAILED_REFUSALS = 5


def _tell_refused(sock: socket.socket, reason: str) -> None:
    with contextlib.suppress(OSError):
        sock.settimeout(1.0)
        send(sock, {"ok": False, "error": reason})
    with contextlib.suppress(OSError):
        sock.close()


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
