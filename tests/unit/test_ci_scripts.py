"""The CI scripts' control flow: ``.ci/run`` builds the testbed images in the background and
waits for them before the tests; ``.ci/testbed-setup.sh`` rejects an unknown step.

``.ci/run`` is copied unchanged into a scratch tree whose ``.ci/testbed-setup.sh`` and
``.ci/compiled-tests.sh`` are stubs, with ``python3`` and ``dpkg`` stubs first on ``PATH``
(each call is logged), so nothing is installed, built or tested for real.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

_PYTHON3 = """#!/bin/sh
echo "python3 $*" >> "$CALLS"
case "$*" in
  *"-m ruff"*)  # fails (with RUFF_RC) only once the image build has started
    while [ "${RUFF_RC:-0}" != 0 ] && [ ! -s "$IMAGES_PID" ]; do sleep 0.05; done
    exit "${RUFF_RC:-0}";;
esac
exit 0
"""
_SETUP = """#!/usr/bin/env bash
echo "setup $1" >> "$CALLS"
if [ "$1" = images ]; then
  echo $$ > "$IMAGES_PID"
  sleep "${IMAGES_SLEEP:-0}"
  echo "images built"
  echo "images done" >> "$CALLS"
  exit "${IMAGES_RC:-0}"
fi
"""


def _stub(path: Path, text: str) -> None:
    path.write_text(text)
    path.chmod(0o755)


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    if shutil.which("setsid") is None:
        pytest.fail("setsid (util-linux) is missing: .ci/run needs it")
    (tmp_path / ".ci").mkdir()
    shutil.copy2(ROOT / ".ci" / "run", tmp_path / ".ci" / "run")
    _stub(tmp_path / ".ci" / "testbed-setup.sh", _SETUP)
    _stub(tmp_path / ".ci" / "compiled-tests.sh", 'echo compiled >> "$CALLS"\n')
    (tmp_path / "bin").mkdir()
    _stub(tmp_path / "bin" / "python3", _PYTHON3)
    _stub(tmp_path / "bin" / "dpkg", "#!/bin/sh\nexit 0\n")
    return tmp_path


def _run(tree: Path, **env: str) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    calls = tree / "calls"
    full = {**os.environ, "PATH": f"{tree / 'bin'}:{os.environ['PATH']}",
            "CALLS": str(calls), "IMAGES_PID": str(tree / "images.pid"), **env}
    done = subprocess.run(["bash", str(tree / ".ci" / "run")], capture_output=True, text=True,
                          env=full, timeout=120, check=False)
    return done, calls.read_text().splitlines()


def test_the_tests_start_after_the_images_and_their_log_is_printed(tree: Path) -> None:
    done, calls = _run(tree, IMAGES_SLEEP="1")
    assert done.returncode == 0, done.stderr
    setup = [c for c in calls if c.startswith("setup")]
    assert setup == ["setup engine", "setup images"]
    tests = next(i for i, c in enumerate(calls) if c.startswith("python3 -m pytest"))
    assert calls.index("images done") < tests
    assert calls.index("compiled") < tests
    assert "images built" in done.stdout
    assert done.stdout.index("images built") < done.stdout.index("== tests")


def test_a_failed_image_build_fails_the_run_before_the_tests(tree: Path) -> None:
    done, calls = _run(tree, IMAGES_RC="3")
    assert done.returncode == 1
    assert "testbed images: build failed (exit 3, log above)" in done.stderr
    assert "images built" in done.stdout  # its log
    assert not any(c.startswith("python3 -m pytest") for c in calls)


def test_an_earlier_failure_stops_the_image_build(tree: Path) -> None:
    done, calls = _run(tree, RUFF_RC="1", IMAGES_SLEEP="60")
    assert done.returncode == 1
    assert "images done" not in calls
    pid = int((tree / "images.pid").read_text())
    deadline = time.monotonic() + 10
    while _alive(pid) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = _alive(pid)
    if left:
        os.killpg(pid, 15)  # do not leave the stub behind when the check fails
    assert not left, "the image build outlived .ci/run"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return not (stat.exists() and stat.read_text().split(")")[-1].split()[0] == "Z")


def test_testbed_setup_rejects_an_unknown_step() -> None:
    done = subprocess.run(["bash", str(ROOT / ".ci" / "testbed-setup.sh"), "bogus"],
                          capture_output=True, text=True, timeout=30, check=False)
    assert done.returncode == 2
    assert done.stderr == ("testbed-setup: unknown step 'bogus' (valid: all, engine, "
                           "images)\n")
