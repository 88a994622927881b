"""The command runners against real components: subprocess, and a real sshd on 127.0.0.1.

The same contract runs against :class:`LocalRunner` and :class:`SSHRunner`; the SSH
runner connects to an OpenSSH server started for the test module with generated
host and user keys (no mock).
"""

from __future__ import annotations

import getpass
import os
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import paramiko
import pytest

from malleable.adapters.shell import (
    CommandError,
    CommandRunner,
    CommandTimeout,
    LocalRunner,
    SSHRunner,
)
from malleable.config import SSHTarget
from malleable.errors import ExternalError

SSHD = shutil.which("sshd") or "/usr/sbin/sshd"
needs_sshd = pytest.mark.skipif(
    not os.path.exists(SSHD), reason="needs OpenSSH's sshd (apt-get install openssh-server)")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _keygen(path: Path) -> str:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)],
                   check=True, timeout=30)
    return path.with_suffix(".pub").read_text().strip()


def _wait_listening(port: int, proc: subprocess.Popen[bytes], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"sshd exited with {proc.returncode}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5) as s:
                if s.recv(4).startswith(b"SSH"):
                    return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"sshd did not listen on {port} within {timeout} s")


class Sshd:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.port = _free_port()
        host_pub = _keygen(root / "host_ed25519")
        user_pub = _keygen(root / "id_ed25519")
        _keygen(root / "other_ed25519")
        (root / "authorized_keys").write_text(user_pub + "\n")
        (root / "authorized_keys").chmod(0o600)
        self.known_hosts = root / "known_hosts"
        self.known_hosts.write_text(f"[127.0.0.1]:{self.port} {host_pub}\n")
        (root / "sshd_config").write_text("\n".join([
            "ListenAddress 127.0.0.1",
            f"HostKey {root / 'host_ed25519'}",
            f"PidFile {root / 'sshd.pid'}",
            f"AuthorizedKeysFile {root / 'authorized_keys'}",
            "PasswordAuthentication no",
            "KbdInteractiveAuthentication no",
            "PubkeyAuthentication yes",
            "PermitRootLogin prohibit-password",
            "UsePAM no",
            "StrictModes no",
            "",
        ]))
        if os.geteuid() == 0:
            Path("/run/sshd").mkdir(mode=0o755, exist_ok=True)
        self.proc = subprocess.Popen(
            [SSHD, "-D", "-e", "-f", str(root / "sshd_config"), "-p", str(self.port)],
            stdout=subprocess.DEVNULL, stderr=(root / "sshd.log").open("wb"))
        _wait_listening(self.port, self.proc)

    def target(self, **changes: object) -> SSHTarget:
        fields: dict[str, object] = dict(host="127.0.0.1", port=self.port,
                                         user=getpass.getuser(), key=self.root / "id_ed25519",
                                         known_hosts=self.known_hosts, connect_timeout=5.0)
        fields.update(changes)
        return SSHTarget(**fields)  # type: ignore[arg-type]

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=5)


@pytest.fixture(scope="module")
def sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sshd]:
    if not os.path.exists(SSHD):
        pytest.skip("needs OpenSSH's sshd (apt-get install openssh-server)")
    server = Sshd(tmp_path_factory.mktemp("sshd"))
    yield server
    server.stop()


@pytest.fixture(params=["local", "ssh"])
def runner(request: pytest.FixtureRequest) -> Iterator[CommandRunner]:
    if request.param == "local":
        yield LocalRunner()
        return
    server: Sshd = request.getfixturevalue("sshd")
    ssh = SSHRunner(server.target())
    yield ssh
    ssh.close()


# ----------------------------------------------------------------- the contract


def test_argv_is_passed_verbatim_without_a_shell(runner: CommandRunner) -> None:
    args = ["a b", "$HOME", "it's", "*", "x;y", ""]
    result = runner.run(["printf", "%s|", *args], timeout=10)
    assert result.rc == 0
    assert result.stdout == "a b|$HOME|it's|*|x;y||"


def test_failure_raises_command_error_with_everything(runner: CommandRunner) -> None:
    with pytest.raises(CommandError) as info:
        runner.run(["sh", "-c", "echo out; echo bad thing >&2; exit 3"], timeout=10)
    err = info.value
    assert (err.rc, err.stdout, err.stderr) == (3, "out\n", "bad thing\n")
    assert err.argv[0] == "sh"
    assert isinstance(err, ExternalError)
    assert "bad thing" in str(err) and "exit 3" in str(err)


def test_unchecked_failure_returns_the_result(runner: CommandRunner) -> None:
    result = runner.run(["sh", "-c", "exit 7"], timeout=10, check=False)
    assert result.rc == 7


def test_input_goes_to_stdin(runner: CommandRunner) -> None:
    text = "line one\nline 'two' $X\n" * 1000
    assert runner.run(["cat"], timeout=10, input=text).stdout == text


def test_large_stdout_and_stderr_together(runner: CommandRunner) -> None:
    script = "head -c 300000 /dev/zero | tr '\\0' a; head -c 200000 /dev/zero | tr '\\0' b >&2"
    result = runner.run(["sh", "-c", script], timeout=20)
    assert len(result.stdout) == 300000 and set(result.stdout) == {"a"}
    assert len(result.stderr) == 200000 and set(result.stderr) == {"b"}


def test_timeout_stops_the_command_and_the_runner_still_works(runner: CommandRunner,
                                                              tmp_path: Path) -> None:
    began = time.monotonic()
    with pytest.raises(CommandTimeout) as info:
        runner.run(["sh", "-c", "echo started; exec sleep 30"], timeout=0.5)
    assert time.monotonic() - began < 5
    assert info.value.timeout == 0.5
    assert runner.run(["echo", "again"], timeout=10).stdout == "again\n"


def test_local_timeout_kills_the_whole_process_group(tmp_path: Path) -> None:
    marker = tmp_path / "survived"
    script = f"(sleep 0.6; touch {marker}) & sleep 30"
    with pytest.raises(CommandTimeout):
        LocalRunner().run(["sh", "-c", script], timeout=0.2)
    time.sleep(1.0)
    assert not marker.exists()


def test_missing_program(runner: CommandRunner) -> None:
    with pytest.raises(CommandError) as info:
        runner.run(["no-such-program-malleable"], timeout=10)
    assert info.value.rc == 127


def test_argv_must_be_a_list() -> None:
    with pytest.raises(ValueError, match="never a shell string"):
        LocalRunner().run("echo hi", timeout=1)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="timeout"):
        LocalRunner().run(["true"], timeout=0)


# ----------------------------------------------------------------- SSH specifics


@needs_sshd
def test_one_connection_is_reused(sshd: Sshd) -> None:
    ssh = SSHRunner(sshd.target())
    assert ssh.transport is None  # no I/O before the first call
    ssh.run(["true"], timeout=10)
    first = ssh.transport
    for _ in range(5):
        ssh.run(["true"], timeout=10)
    assert ssh.transport is first
    ssh.close()
    ssh.run(["true"], timeout=10)
    assert ssh.transport is not first
    ssh.close()


def test_a_connection_is_replaced_after_max_channels_commands(sshd: Sshd) -> None:
    # paramiko's Transport keeps every channel id it opened (channels_seen): a long-lived
    # service must not keep one connection for ever
    ssh = SSHRunner(sshd.target(), max_channels=3)
    ssh.run(["true"], timeout=10)
    first = ssh.transport
    assert first is not None
    ssh.run(["true"], timeout=10)
    ssh.run(["true"], timeout=10)
    assert ssh.transport is first and len(first.channels_seen) == 3
    assert ssh.run(["echo", "fourth"], timeout=10).stdout == "fourth\n"
    second = ssh.transport
    assert second is not first and second is not None and not first.is_active()
    assert len(second.channels_seen) == 1
    ssh.close()


def test_a_worn_connection_is_not_replaced_under_a_running_command(sshd: Sshd) -> None:
    ssh = SSHRunner(sshd.target(), max_channels=1)
    ssh.run(["true"], timeout=10)  # the connection has served its one command
    first = ssh.transport
    out: list[str] = []
    slow = threading.Thread(target=lambda: out.append(
        ssh.run(["sh", "-c", "sleep 1; echo slow"], timeout=20).stdout))
    slow.start()  # a new connection (the worn one had no command in flight)
    deadline = time.monotonic() + 10
    while ssh.transport in (first, None) and time.monotonic() < deadline:
        time.sleep(0.05)
    busy = ssh.transport
    assert busy is not first and busy is not None
    time.sleep(0.2)  # the slow command is running on ``busy``: it is worn, yet in use
    assert ssh.run(["echo", "quick"], timeout=10).stdout == "quick\n"
    assert ssh.transport is busy  # shared, not replaced while the slow command runs
    slow.join(20)
    assert out == ["slow\n"]  # not cut off by the quick command's connection
    ssh.close()


@needs_sshd
def test_unknown_host_key_is_refused(sshd: Sshd, tmp_path: Path) -> None:
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    ssh = SSHRunner(sshd.target(known_hosts=empty))
    with pytest.raises(ExternalError, match="host key not in"):
        ssh.run(["true"], timeout=10)


@needs_sshd
def test_changed_host_key_is_refused(sshd: Sshd, tmp_path: Path) -> None:
    other = (sshd.root / "other_ed25519.pub").read_text().strip()
    wrong = tmp_path / "known_hosts"
    wrong.write_text(f"[127.0.0.1]:{sshd.port} {other}\n")
    ssh = SSHRunner(sshd.target(known_hosts=wrong))
    with pytest.raises(ExternalError, match="does not match"):
        ssh.run(["true"], timeout=10)


@needs_sshd
def test_auto_add_is_possible_in_tests_only(sshd: Sshd, tmp_path: Path) -> None:
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    ssh = SSHRunner(sshd.target(known_hosts=empty), missing_host_key=paramiko.AutoAddPolicy())
    assert ssh.run(["echo", "ok"], timeout=10).stdout == "ok\n"
    ssh.close()


@needs_sshd
def test_wrong_user_key_is_refused(sshd: Sshd) -> None:
    ssh = SSHRunner(sshd.target(key=sshd.root / "other_ed25519"))
    with pytest.raises(ExternalError, match="authentication"):
        ssh.run(["true"], timeout=10)


@needs_sshd
def test_connection_refused_is_an_external_error(sshd: Sshd) -> None:
    ssh = SSHRunner(sshd.target(port=_free_port(), connect_timeout=2.0))
    with pytest.raises(ExternalError, match="cannot connect") as caught:
        ssh.run(["true"], timeout=5)
    assert "Errno None" not in str(caught.value)


@needs_sshd
def test_missing_known_hosts_file(sshd: Sshd, tmp_path: Path) -> None:
    ssh = SSHRunner(sshd.target(known_hosts=tmp_path / "absent"))
    with pytest.raises(ExternalError, match="cannot read known_hosts"):
        ssh.run(["true"], timeout=5)


@needs_sshd
def test_a_host_key_alias_pin_survives_a_new_port(sshd: Sshd, tmp_path: Path) -> None:
    """The testbed pins its host key to the controller's name: a published port that
    changed on restart (stale ``[host]:port`` entry) does not matter."""
    host = (sshd.root / "host_ed25519.pub").read_text().split()
    other = (sshd.root / "other_ed25519.pub").read_text().strip()
    pinned = tmp_path / "known_hosts"
    pinned.write_text(f"vu-ctl {host[0]} {host[1]}\n[127.0.0.1]:{sshd.port} {other}\n")
    ssh = SSHRunner(sshd.target(known_hosts=pinned, host_key_alias="vu-ctl"))
    assert ssh.run(["echo", "ok"], timeout=10).stdout == "ok\n"
    ssh.close()
    with pytest.raises(ExternalError, match="does not match"):  # another key under it
        _run_with_alias(sshd, tmp_path, f"x {other}\n", "x")
    with pytest.raises(ExternalError, match="host key not in"):
        _run_with_alias(sshd, tmp_path, f"[127.0.0.1]:{sshd.port} {' '.join(host[:2])}\n",
                        "vu-ctl")


def _run_with_alias(sshd: Sshd, tmp_path: Path, text: str, alias: str) -> None:
    path = tmp_path / "alias_known_hosts"
    path.write_text(text)
    ssh = SSHRunner(sshd.target(known_hosts=path, host_key_alias=alias))
    try:
        ssh.run(["true"], timeout=10)
    finally:
        ssh.close()
