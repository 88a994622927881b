"""The application channel: real sockets on loopback, MUNGE replaced by a fake that
signs with the agent's user (unmunge's own output is parsed from a recorded sample)."""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from malleable.adapters.shell import LocalRunner
from malleable.site import agent as agent_mod
from malleable.site.agent import Agent
from malleable.site.channel import (
    ChannelError,
    ChannelServer,
    Decoded,
    NotNow,
    RelayShell,
    Session,
    parse_unmunge,
)

UNMUNGE = """STATUS:          Success (0)
ENCODE_HOST:     vu-c0 (172.18.0.4)
ENCODE_TIME:     2026-11-24 02:52:00 +0000 (1795488720)
DECODE_TIME:     2026-11-24 02:52:00 +0000 (1795488720)
TTL:             300
CIPHER:          aes128 (4)
MAC:             sha256 (5)
ZIP:             none (0)
UID:             alice (2001)
GID:             alice (2001)
LENGTH:          27

malleable-channel:vu:42:ab"""

JOBS = {("vu", 42): ("alice", True), ("vu", 43): ("alice", False)}


def owner(site: str, job: int) -> tuple[str, bool] | None:
    return JOBS.get((site, job))


def verify(site: str, credential: str) -> Decoded:
    data = json.loads(credential)
    if data.get("replayed"):
        return Decoded(False, "", "", "Replayed credential (17)")
    return Decoded(True, data["user"], data["payload"], "Success (0)")


def fake_munge(user: str, tamper: Callable[[str], str] = lambda p: p) -> Callable[[str], str]:
    return lambda text: json.dumps({"user": user, "payload": tamper(text)})


@pytest.fixture
def server() -> Iterator[ChannelServer]:
    srv = ChannelServer("127.0.0.1", 0)
    srv.start()
    yield srv
    srv.close()


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    run = tmp_path / "malleable-alice" / "42"
    (run / "ch").mkdir(parents=True)
    (run / "jacobi.py").write_text("print('x')\n")
    (run / "ch" / "offer.json").write_text('{"seq": 7, "target": 2}')
    return run


def connect(srv: ChannelServer, run: Path, job: int = 42, user: str = "alice",
            tamper: Callable[[str], str] = lambda p: p) -> tuple[threading.Thread, list[bool]]:
    """An agent's session in a thread, with munge faked as ``user``; its result in a list."""
    agent = Agent(str(run), "jacobi.py", "here")
    outcome: list[bool] = []

    def go() -> None:
        original = agent_mod.munge
        agent_mod.munge = fake_munge(user, tamper)
        try:
            outcome.append(agent_mod.session(agent, ("127.0.0.1", srv.port), "vu", job,
                                             timeout=10))
        except OSError:
            outcome.append(False)
        finally:
            agent_mod.munge = original

    thread = threading.Thread(target=go, daemon=True)
    thread.start()
    return thread, outcome


def settle_until(srv: ChannelServer, done: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, "the channel did not settle"
        srv.settle(owner, verify)
        time.sleep(0.02)


def test_unmunge_output_is_parsed() -> None:
    decoded = parse_unmunge(UNMUNGE)
    assert decoded == Decoded(True, "alice", "malleable-channel:vu:42:ab", "Success (0)")
    assert not parse_unmunge("STATUS:  Replayed credential (17)\n\n").ok


def test_the_owner_opens_the_channel_and_the_service_works_the_run_dir(
        server: ChannelServer, run_dir: Path) -> None:
    thread, outcome = connect(server, run_dir)
    settle_until(server, lambda: server.session("vu", 42) is not None)
    session = server.session("vu", 42)
    assert session is not None and (session.user, session.seq) == ("alice", 7)
    shell = RelayShell(LocalRunner(), session=session)
    shell.write_json("here", f"{run_dir}/ch/offer.json", {"seq": 8, "target": 4})
    assert shell.read_json("here", f"{run_dir}/ch/offer.json") == {"seq": 8, "target": 4}
    assert shell.read("here", f"{run_dir}/ch/answer-8.json") is None
    assert shell.stage("here", f"{run_dir}/jacobi.py", "ignored")  # the host name
    with pytest.raises(ChannelError, match="outside the run directory"):
        shell.read("here", "/etc/passwd")
    with pytest.raises(ChannelError, match="outside the run directory"):
        shell.write("here", f"{run_dir}/../../escape", "x")
    with pytest.raises(ChannelError, match="no command on a user's node"):
        shell.run("here", ["id"])
    session.close()
    thread.join(10)
    assert outcome == [True]  # a closed channel: the agent connects again at once


@pytest.mark.parametrize(("job", "user", "tamper", "reason"), [
    (42, "bob", lambda p: p, "bob is not the owner of job 42 (alice)"),
    (42, "alice", lambda p: p.replace(":42:", ":41:"), "not for this job and nonce"),
    (43, "alice", lambda p: p, "was not submitted with --mpi"),
    (44, "alice", lambda p: p, "no tagged job 44"),
])
def test_others_cannot_open_a_jobs_channel(server: ChannelServer, run_dir: Path, job: int,
                                           user: str, tamper: Callable[[str], str],
                                           reason: str,
                                           caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, "malleable.site.channel")
    thread, outcome = connect(server, run_dir, job, user, tamper)
    settle_until(server, lambda: server.refused == 1)
    thread.join(10)
    assert outcome == [False] and server.session("vu", job) is None
    [line] = [r.getMessage() for r in caplog.records if r.name == "malleable.site.channel"]
    assert "event=channel_refused" in line and reason in line
    assert f"site=vu native_id={job} " in line  # no service told the channel vu's kind


def test_the_channel_names_a_job_s_id_as_the_service_says(
        server: ChannelServer, run_dir: Path, caplog: pytest.LogCaptureFixture) -> None:
    server.id_key = {"vu": "oar_id"}.__getitem__
    caplog.set_level(logging.INFO, "malleable.site.channel")
    connect(server, run_dir, 42, "bob")
    settle_until(server, lambda: server.refused == 1)
    thread, _ = connect(server, run_dir)
    settle_until(server, lambda: server.session("vu", 42) is not None)
    lines = [r.getMessage() for r in caplog.records if "event=channel_" in r.getMessage()]
    assert any("event=channel_refused site=vu oar_id=42 " in line for line in lines), lines
    assert any("event=channel_open site=vu oar_id=42 user=alice" in line for line in lines)
    session = server.session("vu", 42)
    assert session is not None
    session.close()
    thread.join(10)


def test_a_credential_unmunge_refuses_is_refused(server: ChannelServer, run_dir: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(agent_mod, "munge", lambda text: json.dumps({"replayed": True}))
    agent = Agent(str(run_dir), "jacobi.py", "here")
    outcome: list[bool] = []
    thread = threading.Thread(target=lambda: outcome.append(agent_mod.session(
        agent, ("127.0.0.1", server.port), "vu", 42, timeout=10)), daemon=True)
    thread.start()
    settle_until(server, lambda: server.refused == 1)
    thread.join(10)
    assert outcome == [False] and server.session("vu", 42) is None


def test_the_agent_reconnects_to_a_restarted_service(run_dir: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    first = ChannelServer("127.0.0.1", 0)
    first.start()
    port = first.port
    monkeypatch.setattr(agent_mod, "munge", fake_munge("alice"))
    agent = Agent(str(run_dir), "jacobi.py", "here")
    thread = threading.Thread(target=agent_mod.serve,
                              args=(agent, ("127.0.0.1", port), "vu", 42), daemon=True)
    thread.start()
    settle_until(first, lambda: first.session("vu", 42) is not None)
    first.close()  # the service stops (SIGKILL closes its sockets the same way)
    second = ChannelServer("127.0.0.1", port)
    second.start()
    try:
        settle_until(second, lambda: second.session("vu", 42) is not None, timeout=20)
        session = second.session("vu", 42)
        assert session is not None
        assert session.call("read", node="here", path=f"{run_dir}/jacobi.py")["text"]
        (run_dir / "ch" / "exit").write_text("0\n")  # the run ends: the agent stops
        session.close()
        thread.join(20)
        assert not thread.is_alive()
    finally:
        second.close()


def test_a_session_whose_agent_left_raises(server: ChannelServer, run_dir: Path) -> None:
    thread, _ = connect(server, run_dir)
    settle_until(server, lambda: server.session("vu", 42) is not None)
    session: Session | None = server.session("vu", 42)
    assert session is not None
    session.sock.shutdown(2)
    with pytest.raises(ChannelError):
        session.call("read", node="here", path=f"{run_dir}/ch/offer.json")
    server.settle(owner, verify)
    assert server.session("vu", 42) is None
    thread.join(10)


def test_a_registration_waits_while_its_site_does_not_answer(server: ChannelServer,
                                                             run_dir: Path) -> None:
    answers = iter([True, True, False])

    def sometimes(site: str, job: int) -> tuple[str, bool] | None:
        if next(answers, False):
            raise NotNow(site)
        return owner(site, job)

    thread, _ = connect(server, run_dir)
    deadline = time.monotonic() + 10
    while server.session("vu", 42) is None:
        assert time.monotonic() < deadline
        server.settle(sometimes, verify)
        time.sleep(0.05)
    assert server.refused == 0
    server.close()
    thread.join(10)
