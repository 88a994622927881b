"""Run MPI programs for the tests: real ``mpirun`` on this host, small counts, bounded time."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
PROGRAMS = ROOT / "tests" / "mpi" / "programs"
MPIRUN = shutil.which("mpirun")
TIMEOUT = 180.0


def have_mpi4py() -> bool:
    import importlib.util

    return importlib.util.find_spec("mpi4py") is not None


needs_mpi = pytest.mark.skipif(
    MPIRUN is None or not have_mpi4py(),
    reason="needs Open MPI's mpirun and mpi4py (apt-get install openmpi-bin libopenmpi-dev; "
           "pip install mpi4py)")


def mpi_env() -> dict[str, str]:
    """Open MPI settings for running as root in a container on loopback, oversubscribed."""
    env = dict(os.environ)
    env.update({
        "OMPI_ALLOW_RUN_AS_ROOT": "1",
        "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
        "OMPI_MCA_btl_vader_single_copy_mechanism": "none",
        # parents and spawned children talk over TCP; docker bridges on the host break it
        "OMPI_MCA_btl_tcp_if_include": "lo",
        "OMPI_MCA_oob_tcp_if_include": "lo",
        "OMPI_MCA_mpi_yield_when_idle": "1",
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT / "src"),
                                                     env.get("PYTHONPATH", "")])),
    })
    return env


def mpirun_argv(n: int, script: Path, *args: str) -> list[str]:
    assert MPIRUN is not None
    return [MPIRUN, "--oversubscribe", "-n", str(n), sys.executable, str(script), *args]


def start(n: int, script: Path, *args: str, cwd: Path) -> subprocess.Popen[str]:
    """Start mpirun in its own process group (so a timeout can end all of it)."""
    return subprocess.Popen(mpirun_argv(n, script, *args), cwd=cwd, env=mpi_env(), text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True)


def finish(proc: subprocess.Popen[str], timeout: float = TIMEOUT) -> str:
    """Wait for mpirun; on timeout end its whole process group and fail."""
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        dump_stacks(proc)
        stop(proc)
        out, _ = proc.communicate()
        pytest.fail(f"mpirun did not finish within {timeout:.0f} s; the ranks' stacks (of "
                    f"programs that register faulthandler on SIGUSR1) follow:\n{out}")
    if proc.returncode != 0:
        pytest.fail(f"mpirun exited with {proc.returncode}:\n{out}")
    return out


def dump_stacks(proc: subprocess.Popen[str], wait: float = 3.0) -> None:
    """Ask every process of a hung run for its Python stacks (SIGUSR1 to the session;
    mpirun forwards it to the ranks too) and give them ``wait`` seconds to print."""
    try:
        os.killpg(proc.pid, signal.SIGUSR1)
    except ProcessLookupError:
        return
    time.sleep(wait)


def stop(proc: subprocess.Popen[str]) -> None:
    """End mpirun and everything it started (its own session), if it still runs."""
    if proc.poll() is not None:
        return
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=5)
            return
        except subprocess.TimeoutExpired:
            continue


def run(n: int, script: Path, *args: str, cwd: Path, timeout: float = TIMEOUT) -> str:
    return finish(start(n, script, *args, cwd=cwd), timeout)


def result(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def sizes(res: dict[str, Any]) -> list[int]:
    return [phase["size"] for phase in res["phases"]]


def starts(res: dict[str, Any]) -> list[int]:
    return [phase["iteration"] for phase in res["phases"]]
