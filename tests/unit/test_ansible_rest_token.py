"""The ``malleable_manager`` role's token maker (``files/malleable-rest-token``), run here
with a stand-in ``scontrol`` on PATH: the token file is replaced whole, 0600, or left as
it was when ``scontrol`` fails or prints no token."""

from __future__ import annotations

import getpass
import os
import stat
import subprocess
from pathlib import Path

SCRIPT = (Path(__file__).resolve().parents[2] / "ansible" / "roles" / "malleable_manager"
          / "files" / "malleable-rest-token")
TOKEN = "eyJhbGciOiJIUzI1NiJ9.eyJzdW4iOiJtYWxsZWFibGUifQ.c2ln"


def _run(tmp_path: Path, answer: str, rc: int, *args: str) -> subprocess.CompletedProcess[str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    fake = bin_dir / "scontrol"
    fake.write_text(f'#!/bin/sh\necho "$@" >> {tmp_path / "argv"}\n'
                    f"printf '%s\\n' '{answer}'\nexit {rc}\n")
    fake.chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"}
    return subprocess.run(["sh", str(SCRIPT), *args], capture_output=True, text=True,
                          env=env, timeout=30, check=False)


def test_a_token_is_written_whole_and_private(tmp_path: Path) -> None:
    file = tmp_path / "tokens" / "vu.jwt"
    file.parent.mkdir()
    me = getpass.getuser()
    done = _run(tmp_path, f"SLURM_JWT={TOKEN}", 0, str(file), me, "malleable", "172800", "vu")
    assert done.returncode == 0, done.stderr
    assert file.read_text() == TOKEN + "\n"
    assert stat.S_IMODE(file.stat().st_mode) == 0o600
    assert (tmp_path / "argv").read_text().split() == [
        "--clusters=vu", "token", "username=malleable", "lifespan=172800"]
    assert sorted(p.name for p in file.parent.iterdir()) == ["vu.jwt"]  # no temporary left
    assert TOKEN not in done.stdout + done.stderr


def test_a_failed_or_empty_answer_keeps_the_old_token(tmp_path: Path) -> None:
    file = tmp_path / "vu.jwt"
    file.write_text("old\n")
    me = getpass.getuser()
    failed = _run(tmp_path, "scontrol: error: Invalid user", 1, str(file), me, "m", "60")
    assert failed.returncode != 0 and file.read_text() == "old\n"
    garbage = _run(tmp_path, "; rm -rf /", 0, str(file), me, "m", "60")
    assert garbage.returncode == 3 and "no token" in garbage.stderr
    assert file.read_text() == "old\n"
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".token")) == []
    bad = _run(tmp_path, TOKEN, 0, str(file), me, "m", "2d")
    assert bad.returncode == 2 and file.read_text() == "old\n"
