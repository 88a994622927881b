"""Run MPI programs for the tests: real ``mpirun`` on this host, small counts, bounded time."""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
PROGRAMS = ROOT / "tests" / "mpi" / "programs"
MPIRUN = shutil.which("mpirun")
TIMEOUT = 180.0
logger = logging.getLogger(__name__)
STACKS = Path(__file__).resolve().parent / "stacks"
"""A ``sitecustomize`` that makes SIGUSR1 print a Python process's stacks."""
#: Where a parent set waits when Open MPI's spawn hangs: the intermittent hang of Open
#: MPI 4.1 with an external PMIx 4 (Debian 12's build), openpmix/openpmix#2735, which
#: upstream did not fix for 4.1. Seen here about once in 50 any-to-any runs under load.
SPAWN_HANG = re.compile(r"line \d+ in _spawn\b")
#: What the library's spawn watchdog prints when it aborts a run hung in that spawn.
WATCHDOG = re.compile(r"malleable: spawning \d+ processes hung for")
#: The watchdog's limit in the tests: under the run timeout, so a hung spawn ends the run
#: (exit code 75) well before it; far above a spawn's time even on a loaded machine.
TEST_SPAWN_TIMEOUT = "60"


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
        "MALLEABLE_SPAWN_TIMEOUT": env.get("MALLEABLE_SPAWN_TIMEOUT", TEST_SPAWN_TIMEOUT),
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT / "src"), str(STACKS),
                                                     env.get("PYTHONPATH", "")])),
    })
    return env


def mpirun_argv(n: int, script: Path, *args: str) -> list[str]:
    assert MPIRUN is not None
    return [MPIRUN, "--oversubscribe", "-n", str(n), sys.executable, str(script), *args]


def start(n: int, script: Path, *args: str, cwd: Path,
          env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    """Start mpirun in its own process group (so a timeout can end all of it); ``env`` adds
    to (or overrides) :func:`mpi_env`."""
    return subprocess.Popen(mpirun_argv(n, script, *args), cwd=cwd,
                            env={**mpi_env(), **(env or {})}, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            start_new_session=True)


def finish(proc: subprocess.Popen[str], timeout: float = TIMEOUT,
           ok: tuple[int, ...] = (0,)) -> str:
    """Wait for mpirun; on timeout end its whole process group and fail (:class:`Hung`);
    fail on an exit code not in ``ok`` (:class:`Hung` too when the library's spawn
    watchdog aborted the run)."""
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        dump_stacks(proc)
        stop(proc)
        out, _ = proc.communicate()
        raise Hung(f"mpirun did not finish within {timeout:.0f} s; the stacks of its "
                   f"processes follow:\n{out}") from None
    if proc.returncode not in ok:
        if WATCHDOG.search(out):
            raise Hung(f"mpirun exited with {proc.returncode}: the spawn watchdog aborted "
                       f"it:\n{out}")
        pytest.fail(f"mpirun exited with {proc.returncode}:\n{out}")
    return out


class Hung(pytest.fail.Exception):  # type: ignore[misc,name-defined]
    """A run that did not finish in time (a test failure), with every process's stacks."""

    def __init__(self, msg: str) -> None:
        super().__init__(msg=msg, pytrace=False)


#: How a Python process's stack dump starts (faulthandler, one per process and signal).
_DUMP = b"Current thread 0x"


def dump_stacks(proc: subprocess.Popen[str], wait: float = 30.0, quiet: float = 0.5) -> None:
    """Ask every process of a hung run for its Python stacks (SIGUSR1 to the session;
    mpirun forwards it to the ranks too) and wait until every Python process of the run
    has printed them (and nothing more came for ``quiet`` seconds), ``wait`` seconds at
    most. The output read meanwhile stays with ``proc`` for its ``communicate()``.

    Not a fixed pause: the dumps pass through mpirun's output forwarding, which a loaded
    machine delays (a fixed 3 s here lost them now and then: issue 37's note)."""
    expected = len(_python_processes(proc.pid))
    try:
        os.killpg(proc.pid, signal.SIGUSR1)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + wait
    seen, seen_at = b"", time.monotonic()
    while time.monotonic() < deadline:
        try:
            proc.communicate(timeout=0.1)
            return  # it ended: everything it printed is read
        except subprocess.TimeoutExpired as partial:
            out = partial.output if isinstance(partial.output, bytes) else b""
        if out != seen:
            seen, seen_at = out, time.monotonic()
        elif seen.count(_DUMP) >= max(expected, 1) and time.monotonic() - seen_at >= quiet:
            return
    logger.warning("stacks: %d of %d dumps after %.0f s", seen.count(_DUMP), expected, wait)


def _python_processes(session: int) -> list[int]:
    """The Python processes (the ranks and any spawned ones) of the session ``session``."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            argv0 = (stat.parent / "cmdline").read_bytes().split(b"\0", 1)[0]
            if int(fields[3]) == session and Path(argv0.decode()).name.startswith("python"):
                found.append(int(stat.parent.name))
        except (OSError, IndexError, ValueError):
            continue  # it ended meanwhile
    return found


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


def run(n: int, script: Path, *args: str, cwd: Path, timeout: float = TIMEOUT,
        env: dict[str, str] | None = None, hangs_after: str | None = None) -> str:
    """Run to the end. A run that hangs in Open MPI's spawn (``SPAWN_HANG``, told by the
    stacks, or aborted by the library's spawn watchdog) is run once more, with a warning
    that carries that output; a hang anywhere else, or a second spawn hang, fails the
    test.

    ``hangs_after`` (a test program's marker, relative to ``cwd``): ``timeout`` counts from
    when the run writes that file, the moment it starts to hang on purpose, not from its
    start (which a loaded machine slows); a run that does not write it has ``TIMEOUT``."""
    try:
        return _finish(start(n, script, *args, cwd=cwd, env=env), timeout, cwd, hangs_after)
    except Hung as hung:
        if not (SPAWN_HANG.search(str(hung)) or WATCHDOG.search(str(hung))):
            raise
        warnings.warn(f"Open MPI's spawn hung (openpmix#2735); running once more. "
                      f"{hung}", stacklevel=2)
    return _finish(start(n, script, *args, cwd=cwd, env=env), timeout, cwd, hangs_after)


def _finish(proc: subprocess.Popen[str], timeout: float, cwd: Path,
            hangs_after: str | None) -> str:
    if hangs_after is None:
        return finish(proc, timeout)
    marker = cwd / hangs_after
    before = marker.stat().st_mtime_ns if marker.exists() else None
    deadline = time.monotonic() + TIMEOUT
    while proc.poll() is None and time.monotonic() < deadline:
        if marker.exists() and marker.stat().st_mtime_ns != before:
            return finish(proc, timeout)  # it hangs from now on
        time.sleep(0.1)
    return finish(proc, max(0.0, deadline - time.monotonic()))


def result(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text())
    return data


def sizes(res: dict[str, Any]) -> list[int]:
    return [phase["size"] for phase in res["phases"]]


def starts(res: dict[str, Any]) -> list[int]:
    return [phase["iteration"] for phase in res["phases"]]
