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
