"""The CI scripts' control flow: ``.ci/run`` builds the testbed images in the background and
starts the tests without waiting for them, telling them where the build writes its status
(each test waits for its own image: ``malleable.testbed.images.wait_for_build``), and fails
on the build's exit status at the end; ``.ci/testbed-setup.sh`` writes that status and
rejects an unknown step.

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
  *"-m pytest"*)
    echo "wait ${MALLEABLE_IMAGES_WAIT:-} ${MALLEABLE_CI_IMAGES_BUILDING:-}" >> "$CALLS";;
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
  echo "status ${MALLEABLE_IMAGES_STATUS:-}" >> "$CALLS"
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


def test_the_tests_start_while_the_images_build_and_are_told_where_to_wait(tree: Path) -> None:
    done, calls = _run(tree, IMAGES_SLEEP="3")
    assert done.returncode == 0, done.stderr
    setup = [c for c in calls if c.startswith("setup")]
    assert setup == ["setup engine", "setup images"]
    tests = next(i for i, c in enumerate(calls) if c.startswith("python3 -m pytest"))
    assert calls.index("compiled") < tests
    assert tests < calls.index("images done")  # not after the whole build any more
    status = next(c for c in calls if c.startswith("status ")).removeprefix("status ")
    assert status.startswith("/")
    waits = [c.removeprefix("wait ") for c in calls if c.startswith("wait")]
    # both parts (workers, alone) wait on the build's status, still building (no `done`)
    assert waits == [f"{status} 1", f"{status} 1"]
    assert "images built" in done.stdout  # its log, once the tests are done
    assert done.stdout.index("== tests") < done.stdout.index("images built")
    assert "testbed images (what is left of the build)" in done.stdout
    assert not Path(status).exists()  # the status directory is removed at the end


def test_a_failed_image_build_fails_the_run(tree: Path) -> None:
    done, calls = _run(tree, IMAGES_RC="3")
    assert done.returncode == 1
    assert "testbed images: build failed (exit 3, log above)" in done.stderr
    assert "images built" in done.stdout  # its log
    # the tests ran: those that needed a missing image failed on their own, naming it
    assert any(c.startswith("python3 -m pytest") for c in calls)


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


_BUILD = """#!/bin/sh
case "$*" in
  *"--slurm 24.11"*) echo "24.11 broke"; exit 7;;
  *) echo "built $* (wait=${MALLEABLE_IMAGES_WAIT:-})"; exit 0;;
esac
"""


def test_testbed_setup_writes_each_versions_status_and_goes_on_after_a_failure(
        tmp_path: Path) -> None:
    (tmp_path / "bin").mkdir()
    _stub(tmp_path / "bin" / "python3", _BUILD)
    status = tmp_path / "status"
    status.mkdir()
    env = {**os.environ, "PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}",
           "MALLEABLE_IMAGES_STATUS": str(status), "MALLEABLE_IMAGES_WAIT": "/elsewhere",
           "MALLEABLE_SLURM_VERSIONS": "22.05,24.11,26.05"}
    done = subprocess.run(["bash", str(ROOT / ".ci" / "testbed-setup.sh"), "images"],
                          capture_output=True, text=True, env=env, timeout=60, check=False)
    assert done.returncode == 1
    assert (status / "plan").read_text().split() == ["22.05", "24.11", "26.05"]
    assert [(status / f"{v}.status").read_text().strip() for v in ("22.05", "24.11", "26.05")] \
        == ["0", "7", "0"]
    assert "24.11 broke" in (status / "24.11.log").read_text()
    # the builder never waits for itself
    assert "(wait=)" in (status / "26.05.log").read_text()
    assert (status / "done").exists()
    assert "Slurm 24.11 images FAILED (exit 7)" in done.stderr
    assert not list(status.glob("*.tmp"))
