"""The application channel's front door: connections accepted and handshakes read, bounded.

One thread serves every connection that has not finished its handshake with
:mod:`selectors` (epoll: descriptor numbers never matter), never a thread per connection.
What a client may hold is capped (:class:`Limits`):

* **connections** waiting for their handshake, in all and per peer address; past a cap
  the oldest of that peer's (else of the busiest peer's) goes, those that have not said
  hello first, so that a flood from one host costs a newcomer at most a retry;
* a **deadline** to say hello and send the credential (``handshake`` seconds);
* the **length** of what is read before the credential (:data:`MAX_HANDSHAKE` bytes);
* the **credentials** sent, per address (``rate`` per second, ``burst`` at once: beyond,
  refused at once, so that one host cannot fill the queue), and those waiting for a check
  (``queue``): beyond, refused at once ("busy").

A finished handshake (hello, nonce, credential) becomes a :class:`Registration` that the
service verifies later (:mod:`malleable.site.channel`). Connections dropped here are not
logged one by one: :class:`Tally` counts them and logs one summary line per
``summary`` seconds (``event=channel_dropped``).
"""

from __future__ import annotations

import contextlib
import errno
import logging
import queue
import secrets
import selectors
import socket
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from malleable.site.agent import LineReader, send

logger = logging.getLogger("malleable.site.channel")

#: Bytes a client may send before its credential is read (hello and credential lines).
MAX_HANDSHAKE = 16384


@dataclass(frozen=True, slots=True)
class Limits:
    """What clients of the channel may hold (see the module docstring)."""

    connections: int = 256
    """Connections in their handshake, in all."""
    per_peer: int = 32
    """Connections in their handshake from one address."""
    handshake: float = 10.0
    """Seconds to send the hello and the credential."""
    queue: int = 64
    """Credentials waiting for their check (each holds its connection open)."""
    rate: float = 2.0
    """Credential checks per second from one address, sustained."""
    burst: int = 10
    """Credential checks from one address at once (the bucket's size)."""
    summary: float = 10.0
    """Seconds between two summary lines of dropped or refused connections."""


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
    def address(self) -> str:
        """The peer's host address (without the port)."""
        return self.peer.rpartition(":")[0]

    @property
    def site(self) -> str:
        return str(self.hello.get("site", ""))

    @property
    def job(self) -> int:
        value = self.hello.get("job")
        return value if isinstance(value, int) and not isinstance(value, bool) \
            and value > 0 else 0


class Tally:
    """Counts of dropped and refused connections, logged as one line per period."""

    def __init__(self, period: float) -> None:
        self.period = period
        self.counts: Counter[str] = Counter()
        self.total: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._last = time.monotonic()

    def add(self, reason: str) -> None:
        with self._lock:
            self.counts[reason] += 1
            self.total[reason] += 1

    def flush(self, force: bool = False) -> None:
        """Log the counts since the last line, once ``period`` has passed."""
        now = time.monotonic()
        with self._lock:
            if not self.counts or (now - self._last < self.period and not force):
                return
            counts, self.counts = self.counts, Counter()
            since, self._last = now - self._last, now
        logger.warning("event=channel_dropped seconds=%.0f %s", since,
                       " ".join(f"{k}={v}" for k, v in sorted(counts.items())))


class RateLimit:
    """A token bucket per address: ``rate`` per second, ``burst`` at once (bounded map)."""

    def __init__(self, rate: float, burst: int, size: int = 4096) -> None:
        self.rate, self.burst, self.size = rate, burst, size
        self._buckets: dict[str, tuple[float, float]] = {}

    def allow(self, address: str, now: float | None = None) -> bool:
        now = time.monotonic() if now is None else now
        tokens, last = self._buckets.get(address, (float(self.burst), now))
        tokens = min(float(self.burst), tokens + (now - last) * self.rate)
        if len(self._buckets) >= self.size and address not in self._buckets:
            kept = {a: b for a, b in self._buckets.items()
                    if b[0] + (now - b[1]) * self.rate < self.burst}  # full ones: forgotten
            if len(kept) >= self.size:  # the most recent half stays
                kept = dict(sorted(kept.items(), key=lambda i: i[1][1])[-(self.size // 2):])
            self._buckets = kept
        if tokens < 1.0:
            self._buckets[address] = (tokens, now)
            return False
        self._buckets[address] = (tokens - 1.0, now)
        return True


@dataclass
class _Conn:
    sock: socket.socket
    peer: str
    address: str
    deadline: float
    since: float
    buffer: bytes = b""
    hello: dict[str, Any] | None = None
    nonce: str = ""


class Gate:
    """Accepts connections and reads their handshakes on one thread (module docstring);
    finished ones go to ``ready`` (a bounded queue), or are refused as busy."""

    def __init__(self, listener: socket.socket, limits: Limits, tally: Tally,
                 refuse: Callable[[socket.socket, str], None]) -> None:
        self.listener = listener
        self.limits = limits
        self.tally = tally
        self.refuse = refuse
        self.ready: queue.Queue[Registration] = queue.Queue(maxsize=limits.queue)
        self.rate = RateLimit(limits.rate, limits.burst)
        self.open: dict[int, _Conn] = {}
        self._selector = selectors.DefaultSelector()
        self._stop = threading.Event()
        self._paused_until = 0.0
        listener.setblocking(False)
        self._selector.register(listener, selectors.EVENT_READ, None)
        self.thread = threading.Thread(target=self._loop, name="channel", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self.thread.is_alive() and self.thread is not threading.current_thread():
            self.thread.join(5)
        for conn in list(self.open.values()):
            self._drop(conn, None)
        with contextlib.suppress(KeyError, ValueError, OSError):
            self._selector.unregister(self.listener)
        self._selector.close()

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                events = self._selector.select(0.25)
            except OSError:
                return
            for key, _ in events:
                if key.data is None:
                    self._accept()
                else:
                    self._read(key.data)
            self._expire()
            self.tally.flush()

    def _accept(self) -> None:
        if time.monotonic() < self._paused_until:
            return
        for _ in range(256):
            try:
                sock, peer = self.listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                if exc.errno in (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM):
                    self.tally.add("no_descriptor")
                    self._paused_until = time.monotonic() + 0.1
                return
            self._admit(sock, f"{peer[0]}:{peer[1]}", str(peer[0]))

    def _admit(self, sock: socket.socket, peer: str, address: str) -> None:
        mine = [c for c in self.open.values() if c.address == address]
        if len(mine) >= self.limits.per_peer:
            self._drop(self._victim(mine), "over_peer_cap")
        if len(self.open) >= self.limits.connections:
            counts = Counter(c.address for c in self.open.values())
            busiest = counts.most_common(1)[0][0]
            self._drop(self._victim([c for c in self.open.values() if c.address == busiest]),
                       "over_total_cap")
        sock.setblocking(False)
        now = time.monotonic()
        conn = _Conn(sock, peer, address, now + self.limits.handshake, now)
        self.open[sock.fileno()] = conn
        self._selector.register(sock, selectors.EVENT_READ, conn)

    @staticmethod
    def _victim(conns: list[_Conn]) -> _Conn:
        """The oldest of those that have not said hello, else the oldest."""
        silent = [c for c in conns if c.hello is None]
        return min(silent or conns, key=lambda c: c.since)

    def _drop(self, conn: _Conn, reason: str | None) -> None:
        if reason is not None:
            self.tally.add(reason)
        self.open.pop(conn.sock.fileno(), None)
        with contextlib.suppress(KeyError, ValueError, OSError):
            self._selector.unregister(conn.sock)
        with contextlib.suppress(OSError):
            conn.sock.close()

    def _expire(self) -> None:
        now = time.monotonic()
        for conn in [c for c in self.open.values() if c.deadline < now]:
            self._drop(conn, "handshake_timeout")

    def _read(self, conn: _Conn) -> None:
        try:
            chunk = conn.sock.recv(4096)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            self._drop(conn, "reset")
            return
        if not chunk:
            self._drop(conn, "closed_early")
            return
        conn.buffer += chunk
        try:
            self._advance(conn)
        except (ValueError, OSError):
            self._drop(conn, "bad_handshake")

    def _advance(self, conn: _Conn) -> None:
        """Handle the complete lines read so far: the hello, then the credential."""
        while b"\n" in conn.buffer:
            line, _, conn.buffer = conn.buffer.partition(b"\n")
            message = LineReader.decode(line)
            if conn.hello is None:
                if message.get("hello") != 1:
                    raise ValueError("not a hello")
                conn.hello, conn.nonce = message, secrets.token_hex(16)
                conn.sock.setblocking(True)
                conn.sock.settimeout(1.0)
                send(conn.sock, {"nonce": conn.nonce})
                conn.sock.setblocking(False)
            else:
                if not isinstance(message.get("cred"), str):
                    raise ValueError("no credential")
                self._finish(conn, message["cred"])
                return
        if len(conn.buffer) > MAX_HANDSHAKE:
            raise ValueError("handshake too long")

    def _finish(self, conn: _Conn, credential: str) -> None:
        self.open.pop(conn.sock.fileno(), None)
        self._selector.unregister(conn.sock)
        conn.sock.setblocking(True)
        reader = LineReader(conn.sock)
        reader.buffer = conn.buffer
        assert conn.hello is not None  # set before the credential is read
        reg = Registration(conn.hello, conn.nonce, credential, conn.sock, reader, conn.peer)
        if not self.rate.allow(conn.address):  # one host cannot fill the queue
            self.tally.add("rate_limited")
            self.refuse(conn.sock, "too many credentials from this host: try again later")
            return
        try:
            self.ready.put_nowait(reg)
        except queue.Full:
            self.tally.add("busy")
            self.refuse(conn.sock, "the service is busy: try again later")
