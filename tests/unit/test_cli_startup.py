"""Issue 19: the CLI starts fast. Building the parser (``--help``) and running ``simulate``
import no plotting, SSH or array library; warnings are one human line without -v."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

import malleable
from malleable.cli import DESCRIPTION, _configure_logging, build_parser

HEAVY = ("matplotlib", "paramiko", "numpy", "scipy", "asyncio")


@pytest.mark.parametrize("argv", [["--help"], ["simulate", "--help"], ["testbed", "--help"],
                                  ["experiment", "--help"], ["coorm", "launch", "--help"],
                                  ["simulate", "--json", "--platform", "64"]])
def test_no_heavy_import(argv: list[str]) -> None:
    code = ("import sys\nfrom malleable.cli import main\ntry:\n    main(sys.argv[1:])\n"
            "except SystemExit:\n    pass\n"
            f"print(sorted(m for m in {HEAVY!r} if m in sys.modules), file=sys.stderr)")
    env = {**os.environ, "PYTHONPATH": str(Path(malleable.__file__).parents[1])}
    done = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True,
                          timeout=120, check=False, env=env)
    assert done.stderr.strip().splitlines()[-1] == "[]", done.stderr


def test_the_description_says_what_the_command_does() -> None:
    text = build_parser().format_help()
    assert "The ``malleable`` command." not in text
    assert DESCRIPTION.split(":")[0] in " ".join(text.split())


def test_warnings_are_one_human_line(capsys: pytest.CaptureFixture[str]) -> None:
    root = logging.getLogger()
    saved = root.handlers[:]
    root.handlers = []
    try:
        _configure_logging(0)
        logging.getLogger("malleable.realtime").warning("cycle failed (%d in a row)", 2)
        err = capsys.readouterr().err
    finally:
        root.handlers = saved
    assert err == "malleable: warning: cycle failed (2 in a row)\n"


def _threads_after(code: str, **env: str) -> list[str]:
    """What ``code`` prints (after it, the process's thread count), run in a fresh process
    with ``env`` and without OPENBLAS_NUM_THREADS unless given."""
    base = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    base["PYTHONPATH"] = str(Path(malleable.__file__).parents[1])
    code += "\nimport os\nprint(len(os.listdir('/proc/self/task')))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, check=True, env={**base, **env})
    return done.stdout.split()


def test_numpy_is_loaded_with_one_blas_thread_and_the_variable_given_back(
        tmp_path: Path) -> None:
    """load_numpy: numpy loads with one OpenBLAS thread, the environment the command's own
    programs get is the user's; a value the user set is kept. ``simulate`` of an SWF file
    loads it so (numpy's bundled OpenBLAS otherwise starts a spinning thread per core)."""
    check = ("import os, sys\nprint('numpy' in sys.modules, "
             "os.environ.get('OPENBLAS_NUM_THREADS'))")
    plain = _threads_after("import numpy")
    loaded = _threads_after("from malleable.commands.common import load_numpy\nload_numpy()\n"
                            + check)
    assert loaded == ["True", "None", "1"], (loaded, plain)
    if (os.cpu_count() or 1) > 1:  # where BLAS threads exist, they are what went away
        assert int(plain[-1]) > 1, plain
        kept = _threads_after("from malleable.commands.common import load_numpy\n"
                              "load_numpy()\n" + check, OPENBLAS_NUM_THREADS="2")
        assert kept[:2] == ["False", "2"], kept  # left to the user's value, untouched
    trace = tmp_path / "two.swf"
    trace.write_text("1 0 -1 10 1 -1 -1 1 -1 -1 1 -1 -1 -1 -1 -1 -1 -1\n"
                     "2 5 -1 10 1 -1 -1 1 -1 -1 1 -1 -1 -1 -1 -1 -1 -1\n")
    ran = _threads_after("import contextlib, io\nfrom malleable.cli import main\n"
                         "with contextlib.redirect_stdout(io.StringIO()):\n"
                         f"    assert main(['simulate', '--platform', '4', '--workload', "
                         f"{str(trace)!r}, '--json']) == 0\n" + check)
    assert ran == ["True", "None", "1"], ran
