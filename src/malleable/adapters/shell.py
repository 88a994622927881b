"""Running commands on a cluster: locally or over SSH, argv lists only.

One :class:`CommandRunner` protocol, ``run(argv, timeout) -> Result``, with two
implementations that adapters take as a constructor argument:

* :class:`LocalRunner` runs the argv with :mod:`subprocess` (never a shell) and
  kills the child's whole process group when the timeout expires;
* :class:`SSHRunner` runs it on a remote host with paramiko: key-based, the host key
  checked against a given known_hosts file (``RejectPolicy``), one connection
  reused for every call, the remote command quoted with :func:`shlex.join`, and a
  timeout that closes the channel.

A command that exits non-zero raises :class:`CommandError` (``check=True``, the
default); one that overruns its timeout raises :class:`CommandTimeout`.
"""

from __future__ import annotations

import contextlib
import logging
import os
import selectors
import shlex
import signal
import subprocess
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from malleable.config import SSHTarget
from malleable.errors import ExternalError, require_extra

if TYPE_CHECKING:  # loaded by SSHRunner (the `service` extra): a local runner needs none
    import paramiko

logger = logging.getLogger(__name__)

_CHUNK = 65536


@dataclass(frozen=True, slots=True)
class Result:
    """What a command returned."""

    rc: int
    stdout: str
    stderr: str


class CommandError(ExternalError):
    """A command failed: it exited non-zero, could not start, or overran its timeout."""

    def __init__(self, argv: Sequence[str], rc: int, stdout: str, stderr: str,
                 message: str | None = None) -> None:
        self.argv = list(argv)
        self.rc = rc
        self.stdout = stdout
        self.stderr = stderr
        detail = message or _first_line(stderr) or _first_line(stdout) or "no output"
        super().__init__(f"`{shlex.join(self.argv)}` failed (exit {rc}): {detail}")


class CommandTimeout(CommandError):
    """A command overran its timeout and was stopped."""

    def __init__(self, argv: Sequence[str], timeout: float, stdout: str = "",
                 stderr: str = "") -> None:
        self.timeout = timeout
        super().__init__(argv, -1, stdout, stderr, f"no answer within {timeout:g} s")


def _first_line(text: str) -> str:
    for line in text.splitlines():
        if line.strip():
            return line.strip()
    return ""


@runtime_checkable
class CommandRunner(Protocol):
    """Runs an argv somewhere and returns its result."""

    def run(self, argv: Sequence[str], timeout: float, *, input: str | None = None,
            check: bool = True) -> Result:
        """Run ``argv`` (``input`` on its stdin); CommandError on failure when ``check``."""
        ...

    def close(self) -> None:
        """Release connections; the runner reconnects on its next call."""
        ...


def _checked(argv: Sequence[str], result: Result, check: bool) -> Result:
    if check and result.rc != 0:
        raise CommandError(argv, result.rc, result.stdout, result.stderr)
    return result


def _validate(argv: Sequence[str], timeout: float) -> list[str]:
    if isinstance(argv, str) or not argv:
        raise ValueError("argv must be a non-empty list of strings, never a shell string")
    if not timeout > 0:
        raise ValueError(f"timeout must be positive, not {timeout!r}")
    return [str(a) for a in argv]


# ----------------------------------------------------------------------------- local


class LocalRunner:
    """Runs commands on this machine with subprocess (no shell)."""

    def __init__(self, env: dict[str, str] | None = None) -> None:
        self._env = env

    def run(self, argv: Sequence[str], timeout: float, *, input: str | None = None,
            check: bool = True) -> Result:
        args = _validate(argv, timeout)
        env = None if self._env is None else {**os.environ, **self._env}
        try:
            child = subprocess.Popen(
                args, stdin=subprocess.PIPE if input is not None else subprocess.DEVNULL,
                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                start_new_session=True)
        except OSError as exc:
            raise CommandError(args, 127, "", str(exc), f"cannot run: {exc.strerror}") from None
        try:
            out, err = child.communicate(input, timeout=timeout)
        except subprocess.TimeoutExpired:
            out, err = _kill(child)
            raise CommandTimeout(args, timeout, out, err) from None
        logger.debug("ran %s: rc=%d", args, child.returncode)
        return _checked(args, Result(child.returncode, out, err), check)

    def close(self) -> None:
        """Nothing to release."""


def _kill(child: subprocess.Popen[str]) -> tuple[str, str]:
    """Kill the child's process group and reap it; what it had printed."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(child.pid, signal.SIGKILL)
    out, err = child.communicate()
    return out or "", err or ""


# ----------------------------------------------------------------------------- SSH


def _alias_policy(known: paramiko.HostKeys, alias: str) -> paramiko.MissingHostKeyPolicy:
    """A policy that accepts the server's key only if known_hosts pins it to ``alias``."""
    import paramiko

    class AliasPolicy(paramiko.MissingHostKeyPolicy):
        def missing_host_key(self, client: paramiko.SSHClient, hostname: str,
                             key: paramiko.PKey) -> None:
            pinned = known.lookup(alias)
            if pinned is None or key.get_name() not in pinned:
                raise paramiko.SSHException(f"{alias} not found in known_hosts")
            if pinned[key.get_name()] != key:
                raise paramiko.BadHostKeyException(hostname, key, pinned[key.get_name()])

    return AliasPolicy()


#: Commands one SSH connection serves before it is replaced by a new one (between two
#: commands, when none is in flight). paramiko's ``Transport`` remembers the id of every
#: channel it ever opened (``channels_seen``, never pruned; paramiko issue #1685): a
#: service running a command every few seconds for months would grow without end.
MAX_CHANNELS = 10_000


class SSHRunner:
    """Runs commands on one host over a single, reused SSH connection (paramiko).

    The constructor does no I/O: the connection opens on the first :meth:`run` and
    is opened again after a failure or :meth:`close`, and after ``max_channels``
    commands (see :data:`MAX_CHANNELS`). Host keys must be in ``target.known_hosts``;
    an unknown or changed key is refused. ``missing_host_key`` exists for tests only.
    """

    def __init__(self, target: SSHTarget,
                 missing_host_key: paramiko.MissingHostKeyPolicy | None = None,
                 max_channels: int = MAX_CHANNELS) -> None:
        require_extra("paramiko", "service", f"ssh {target.label}")
        import paramiko

        self.target = target
        self.max_channels = max_channels
        self._policy = missing_host_key or paramiko.RejectPolicy()
        self._client: paramiko.SSHClient | None = None
        self._lock = threading.Lock()
        self._served = 0  # commands started on the current connection
        self._in_flight = 0  # ... and not ended yet
        self._generation = 0  # which connection (a command ends on the one it began on)

    # ------------------------------------------------------------ connection

    def _connect(self) -> tuple[paramiko.Transport, int]:
        """The live transport and its generation, one more command counted in flight on
        it (the caller ends it with :meth:`_done`)."""
        with self._lock:
            client = self._client
            if client is not None:
                transport = client.get_transport()
                worn = self._served >= self.max_channels and self._in_flight == 0
                if transport is not None and transport.is_active() and not worn:
                    self._served += 1
                    self._in_flight += 1
                    return transport, self._generation
                if worn:
                    logger.info("ssh: %s served %d commands: opening a new connection",
                                self.target.label, self._served)
                client.close()
            self._client = None
            self._client = self._open()
            self._generation += 1
            self._served, self._in_flight = 1, 1
            transport = self._client.get_transport()
            if transport is None:  # pragma: no cover - paramiko sets it on connect
                raise ExternalError(f"ssh {self.target.label}: no transport after connect")
            transport.set_keepalive(30)
            return transport, self._generation

    def _done(self, generation: int) -> None:
        with self._lock:
            if generation == self._generation:
                self._in_flight -= 1

    def _open(self) -> paramiko.SSHClient:
        import paramiko

        t = self.target
        client = paramiko.SSHClient()
        try:
            known = paramiko.HostKeys(str(t.known_hosts))
        except OSError as exc:
            raise ExternalError(f"ssh {t.label}: cannot read known_hosts {t.known_hosts}: "
                                f"{exc.strerror}") from None
        if t.host_key_alias is None:
            client.load_host_keys(str(t.known_hosts))
            client.set_missing_host_key_policy(self._policy)
        else:  # no key under [host]:port: every key is checked against the alias's
            client.set_missing_host_key_policy(_alias_policy(known, t.host_key_alias))
        try:
            client.connect(t.host, port=t.port, username=t.user, key_filename=str(t.key),
                           timeout=t.connect_timeout, banner_timeout=t.connect_timeout,
                           auth_timeout=t.connect_timeout, look_for_keys=False,
                           allow_agent=False)
        except paramiko.BadHostKeyException:
            client.close()
            raise ExternalError(f"ssh {t.label}: host key does not match {t.known_hosts} "
                                "(regenerate the config with `malleable testbed config`)") from None
        except paramiko.AuthenticationException as exc:
            client.close()
            raise ExternalError(f"ssh {t.label}: authentication with {t.key} failed: "
                                f"{exc}") from None
        except paramiko.SSHException as exc:
            client.close()
            if "not found in known_hosts" in str(exc):
                raise ExternalError(f"ssh {t.label}: host key not in {t.known_hosts}; refusing "
                                    "to connect (add it, or regenerate the config)") from None
            raise ExternalError(f"ssh {t.label}: {exc}") from None
        except (OSError, EOFError) as exc:
            client.close()
            why = str(exc).removeprefix("[Errno None] ")  # paramiko's NoValidConnectionsError
            raise ExternalError(f"ssh {t.label}: cannot connect: {why}") from None
        logger.info("ssh: connected to %s", t.label)
        return client

    def close(self) -> None:
        with self._lock:
            if self._client is not None:
                self._client.close()
                self._client = None
            self._served = self._in_flight = 0
            self._generation += 1

    @property
    def transport(self) -> paramiko.Transport | None:
        """The live transport (None before the first call): one per runner."""
        return None if self._client is None else self._client.get_transport()

    # ------------------------------------------------------------ running

    def run(self, argv: Sequence[str], timeout: float, *, input: str | None = None,
            check: bool = True) -> Result:
        import paramiko

        args = _validate(argv, timeout)
        deadline = time.monotonic() + timeout
        command = shlex.join(args)
        transport, generation = self._connect()
        try:
            try:
                channel = transport.open_session(timeout=_left(deadline))
            except (paramiko.SSHException, OSError, EOFError) as exc:
                self.close()
                raise ExternalError(f"ssh {self.target.label}: cannot open a channel: "
                                    f"{exc}") from None
            try:
                result = self._exchange(channel, command, input, args, deadline, timeout)
            finally:
                channel.close()
        finally:
            self._done(generation)
        logger.debug("ssh %s ran %s: rc=%d", self.target.label, command, result.rc)
        return _checked(args, result, check)

    def _exchange(self, channel: paramiko.Channel, command: str, input: str | None,
                  args: list[str], deadline: float, timeout: float) -> Result:
        import paramiko

        try:
            channel.settimeout(_left(deadline))
            channel.exec_command(command)
            if input is not None:
                channel.sendall(input.encode())
            channel.shutdown_write()
            out, err = _collect(channel, deadline)
        except _Overrun as over:
            raise CommandTimeout(args, timeout, over.stdout, over.stderr) from None
        except TimeoutError:
            raise CommandTimeout(args, timeout) from None
        except (paramiko.SSHException, OSError, EOFError) as exc:
            self.close()
            raise ExternalError(f"ssh {self.target.label}: {command}: {exc}") from None
        return Result(channel.exit_status, out, err)


class _Overrun(Exception):
    def __init__(self, stdout: str, stderr: str) -> None:
        super().__init__("timeout")
        self.stdout = stdout
        self.stderr = stderr


def _left(deadline: float) -> float:
    return max(0.001, deadline - time.monotonic())


def _collect(channel: paramiko.Channel, deadline: float) -> tuple[str, str]:
    """Read stdout and stderr until end of file and the exit status, by ``deadline``."""
    out: list[bytes] = []
    err: list[bytes] = []

    def drain() -> None:
        while channel.recv_ready():
            out.append(channel.recv(_CHUNK))
        while channel.recv_stderr_ready():
            err.append(channel.recv_stderr(_CHUNK))

    def text() -> tuple[str, str]:
        return (b"".join(out).decode(errors="replace"), b"".join(err).decode(errors="replace"))

    with selectors.DefaultSelector() as ready:  # any descriptor number (not select.select)
        ready.register(channel, selectors.EVENT_READ)
        while True:
            drain()
            if channel.eof_received:
                break
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise _Overrun(*text())
            ready.select(min(remaining, 1.0))
    drain()
    if not channel.status_event.wait(max(0.0, deadline - time.monotonic())):
        raise _Overrun(*text())
    drain()
    return text()

