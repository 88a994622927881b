"""``manager serve``'s start-up failures (one line, exit 2; the traceback with -v) and the
modes of its state directory and files whatever the umask."""

from __future__ import annotations

import os
import socket
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.unit.test_site_serve_process import SRC

CONFIG = """
[service]
state = "{state}"
poll = 0.2
metrics = "{metrics}"
{extra}

[policy]
name = "fpsma"

[clusters.nowhere]
command_timeout = 5
"""


def _serve(tmp_path: Path, *args: str, state: str = "state/state.sqlite",
           metrics: str = "127.0.0.1:0", extra: str = "", umask: int = 0o022,
           timeout: float = 8.0) -> subprocess.CompletedProcess[str]:
    """``manager serve`` run for at most ``timeout`` s (SIGTERM), under ``umask``."""
    config = tmp_path / "manager.toml"
    config.write_text(CONFIG.format(state=state, metrics=metrics, extra=extra))
    env = {**os.environ, "PYTHONPATH": str(SRC), "PATH": "/usr/bin:/bin"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "malleable", *args, "manager", "serve", "--config", str(config),
         "--allow-root"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        cwd=tmp_path, preexec_fn=lambda: os.umask(umask))
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.terminate()
        out, err = proc.communicate(timeout=20)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


@pytest.fixture
def busy_port() -> Iterator[int]:
    with socket.create_server(("127.0.0.1", 0)) as sock:
        yield sock.getsockname()[1]


def _errors(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("malleable:")]


def test_a_metrics_port_in_use_is_one_line_and_exit_2(tmp_path: Path, busy_port: int) -> None:
    done = _serve(tmp_path, metrics=f"127.0.0.1:{busy_port}")
    assert done.returncode == 2, done.stderr
    [line] = _errors(done.stderr)
    assert f"service.metrics: cannot listen on 127.0.0.1:{busy_port}" in line
    assert "Traceback" not in done.stderr


def test_a_state_directory_that_cannot_be_made_is_one_line_and_exit_2(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    done = _serve(tmp_path, state=str(tmp_path / "file" / "sub" / "state.sqlite"))
    assert done.returncode == 2, done.stderr
    [line] = _errors(done.stderr)
    assert "cannot create the state directory" in line and "Traceback" not in done.stderr


def test_a_state_directory_others_can_write_is_refused(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    done = _serve(tmp_path, state=str(shared / "state.sqlite"))
    assert done.returncode == 2, done.stderr
    [line] = _errors(done.stderr)
    assert "is writable by others (mode 0777)" in line
    assert not (shared / "state.sqlite").exists()


def test_with_v_a_failure_prints_its_traceback(tmp_path: Path, busy_port: int) -> None:
    done = _serve(tmp_path, "-v", metrics=f"127.0.0.1:{busy_port}")
    assert done.returncode == 2
    assert "Traceback (most recent call last)" in done.stderr, done.stderr


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.parametrize(("extra", "folder", "files"), [
    ("", 0o700, 0o600), ("group_readable = true", 0o750, 0o640)])
def test_the_state_directory_and_files_have_their_modes_whatever_the_umask(
        tmp_path: Path, extra: str, folder: int, files: int) -> None:
    (tmp_path / "state").mkdir(mode=0o755)  # an existing directory too wide: narrowed
    done = _serve(tmp_path, extra=extra, umask=0o000, timeout=6)
    assert done.returncode == 0, done.stderr
    state = tmp_path / "state"
    assert _mode(state) == folder
    assert _mode(state / "state.sqlite") == files
    assert _mode(state / "state.sqlite.status.json") == files
