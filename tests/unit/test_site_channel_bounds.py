"""The application channel under abuse (real sockets on loopback): caps on connections, a
handshake deadline, no thread per connection, descriptor numbers above 1024, and a storm of
bad credentials checked off the caller's thread and logged as a summary."""

from __future__ import annotations

import contextlib
import json
import logging
import os
import resource
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from malleable.site.channel import ChannelServer, Decoded, Limits
from malleable.site.gate import RateLimit
from tests.unit.test_site_channel import connect, owner, settle_until, verify


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    run = tmp_path / "alice" / "42"
    (run / "ch").mkdir(parents=True)
    (run / "jacobi.py").write_text("print('x')\n")
    return run


@contextlib.contextmanager
def serving(limits: Limits) -> Iterator[ChannelServer]:
    srv = ChannelServer("127.0.0.1", 0, limits.handshake, limits=limits)
    srv.start()
    try:
        yield srv
    finally:
        srv.close()


def idle(port: int, count: int) -> list[socket.socket]:
    socks = []
    for _ in range(count):
        socks.append(socket.create_connection(("127.0.0.1", port), timeout=5))
    return socks


def _room(needed: int) -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < needed:
        if hard != resource.RLIM_INFINITY and hard < needed:
            pytest.skip(f"needs {needed} descriptors, the hard limit is {hard}")
        resource.setrlimit(resource.RLIMIT_NOFILE, (needed, hard))


def test_idle_connections_are_capped_and_the_owner_still_gets_in(run_dir: Path) -> None:
    """1,500 idle connections from one address: the service holds at most its per-peer cap,
    with one thread (not one per connection), and alice's agent from the same address opens
    its channel within 10 s."""
    _room(4096)
    limits = Limits(connections=64, per_peer=16, handshake=30.0)
    threads = threading.active_count()
    with serving(limits) as srv:
        flood = idle(srv.port, 1500)
        try:
            assert srv.open_handshakes <= limits.per_peer
            assert threading.active_count() <= threads + 1
            began = time.monotonic()
            thread, _ = connect(srv, run_dir)
            settle_until(srv, lambda: srv.session("vu", 42) is not None, timeout=10)
            assert time.monotonic() - began < 10
            assert srv.tally.total["over_peer_cap"] >= 1500 - limits.per_peer
        finally:
            for sock in flood:
                sock.close()
        session = srv.session("vu", 42)
        assert session is not None
        session.close()
        thread.join(10)


def test_a_silent_connection_is_closed_at_the_handshake_deadline() -> None:
    with serving(Limits(handshake=0.5)) as srv:
        [sock] = idle(srv.port, 1)
        sock.settimeout(5)
        began = time.monotonic()
        assert sock.recv(10) == b""  # closed by the service
        assert time.monotonic() - began < 3
        assert srv.tally.total["handshake_timeout"] == 1


def test_descriptor_numbers_above_1024_do_not_matter(run_dir: Path) -> None:
    """``select.select`` fails past descriptor 1023; the channel never uses it."""
    _room(4096)
    filler = [os.open(os.devnull, os.O_RDONLY) for _ in range(1100)]
    try:
        with serving(Limits()) as srv:
            thread, _ = connect(srv, run_dir)
            settle_until(srv, lambda: srv.session("vu", 42) is not None)
            session = srv.session("vu", 42)
            assert session is not None and session.sock.fileno() > 1024
            session.close()
            thread.join(10)
    finally:
        for fd in filler:
            os.close(fd)


def _bad_hello(port: int, job: int = 42) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    sock.sendall(json.dumps({"hello": 1, "site": "vu", "job": job}).encode() + b"\n")
    sock.recv(1000)  # the nonce
    sock.sendall(json.dumps({"cred": json.dumps({"user": "bob", "payload": "x"})}).encode()
                 + b"\n")
    return sock


def test_a_storm_of_bad_credentials_never_holds_up_the_cycle(
        caplog: pytest.LogCaptureFixture) -> None:
    """500 bad credentials naming alice's job, each check taking 20 ms: ``settle`` (the
    cycle, here every 20 ms on its own thread) never waits for one, every one is answered,
    the checks are rate-limited per address, and the log has a few lines and a summary,
    not 500."""
    caplog.set_level(logging.INFO, "malleable.site.channel")
    checked: list[float] = []

    def slow(site: str, credential: str) -> Decoded:
        checked.append(time.monotonic())
        time.sleep(0.02)
        return verify(site, credential)

    limits = Limits(queue=16, rate=5.0, burst=10, summary=0.5)
    settles: list[float] = []
    stop = threading.Event()
    with serving(limits) as srv:
        def cycle() -> None:
            while not stop.is_set():
                began = time.monotonic()
                srv.settle(owner, slow)
                settles.append(time.monotonic() - began)
                time.sleep(0.02)

        cycling = threading.Thread(target=cycle, daemon=True)
        cycling.start()
        socks = [_bad_hello(srv.port) for _ in range(500)]
        verdicts = []
        for sock in socks:
            sock.settimeout(20)
            with contextlib.suppress(OSError):
                verdicts.append(sock.recv(1000))
            sock.close()
        time.sleep(0.6)
        stop.set()
        cycling.join(10)
        srv.settle(owner, slow)
    assert sum(b'"ok": false' in v for v in verdicts) == 500  # every one answered: refused
    assert max(settles) < 0.05, max(settles)  # bookkeeping only, no unmunge on the cycle
    assert len(checked) < 60  # the rate limit: about burst + rate x seconds, not 500
    lines = [r.getMessage() for r in caplog.records]
    assert sum("event=channel_refused " in line for line in lines) <= 20
    summaries = [line for line in lines if "event=channel_dropped" in line]
    assert summaries and any("rate_limited=" in line for line in summaries)


def test_the_rate_limit_refills_and_stays_bounded() -> None:
    rate = RateLimit(rate=1.0, burst=2, size=3)
    assert [rate.allow("a", 0.0) for _ in range(3)] == [True, True, False]
    assert rate.allow("a", 1.0)
    for k in range(10):
        rate.allow(f"h{k}", 100.0)
    assert len(rate._buckets) <= 4
