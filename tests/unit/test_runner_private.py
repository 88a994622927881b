"""Private run directories: the shell checks the batch script and the nodes run, and the
agent's own (the owner checks need a second user: the abuse suite, on the testbed)."""

from __future__ import annotations

import os
import subprocess
import tempfile
from pathlib import Path

import pytest

from malleable.runner.private import PRIVATE_SH, NotPrivate, check_private, make_private


def _chain(home: Path, path: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["sh", "-c", PRIVATE_SH + 'private_chain "$1" && private "$1/ch"',
                           "sh", str(path)], env={**os.environ, "HOME": str(home)},
                          capture_output=True, text=True, timeout=30, check=False)


def _mode(path: Path) -> int:
    return path.stat().st_mode & 0o777


def test_the_chain_from_the_home_is_made_private(tmp_path: Path) -> None:
    home = tmp_path / "alice"
    home.mkdir(mode=0o755)
    (home / ".malleable").mkdir(mode=0o755)  # made wider by an older version: narrowed
    run = home / ".malleable" / "run" / "12"
    done = _chain(home, run)
    assert done.returncode == 0, done.stderr
    for path in (home / ".malleable", run.parent, run, run / "ch"):
        assert _mode(path) == 0o700, path
    assert _chain(home, run).returncode == 0  # again on a node sharing the home: accepted
    check_private(str(run))


@pytest.mark.parametrize(("squat", "said"), [
    ("link", "is a symbolic link"), ("wide home", "is writable by others (mode 777)"),
    ("tmp", "/tmp is writable by others")])
def test_what_another_user_could_control_is_refused(tmp_path: Path, squat: str,
                                                    said: str) -> None:
    home = tmp_path / "alice"
    home.mkdir(mode=0o755)
    run = home / ".malleable" / "run" / "12"
    if squat == "link":
        run.parent.mkdir(parents=True, mode=0o700)
        run.symlink_to(tmp_path)
    elif squat == "wide home":
        home.chmod(0o777)
    else:
        run = Path(tempfile.mkdtemp(dir="/tmp"))  # its own 0700 directory, in /tmp
    done = _chain(home, run)
    assert done.returncode != 0 and said in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1  # one line
    if squat == "tmp":
        with pytest.raises(NotPrivate, match="writable by others"):
            make_private(str(run))
        run.rmdir()


def test_the_agent_s_check(tmp_path: Path) -> None:
    run = tmp_path / "run"
    run.mkdir(mode=0o755)
    with pytest.raises(NotPrivate, match="mode 0755, not 0700"):
        check_private(str(run))
    assert make_private(str(run)) == str(run) and _mode(run) == 0o700
    link = tmp_path / "link"
    link.symlink_to(run)
    with pytest.raises(NotPrivate, match="symbolic link"):
        check_private(str(link))
    with pytest.raises(NotPrivate, match="owned by uid"):
        check_private(str(run), uid=os.getuid() + 1)
