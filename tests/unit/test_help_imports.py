"""Issue 40: every command's ``--help`` loads no plotting, SSH, crypto or metrics library,
no numpy, no simulator and no process pool.

Those libraries belong to the optional extras (README, "Install": `service`, `testbed`) or
cost a tenth of a second to half a second of CPU each (matplotlib, numpy, the simulator
and the experiments' runs): a command imports them when it runs, never to print its help
(target: under 0.15 s CPU, ``benchmarks/bench_help.py``). Every leaf command of the parser
is tried, the experiments' included (their ``options`` module is loaded when one is named).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

import pytest

import malleable
from malleable.cli import build_parser
from malleable.experiments import EXPERIMENTS

HEAVY = ("matplotlib", "paramiko", "cryptography", "prometheus_client", "docker", "numpy",
         "malleable.sim", "concurrent.futures", "submitit")


def _leaves(parser: argparse.ArgumentParser, prefix: tuple[str, ...] = ()) -> list[list[str]]:
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        return [list(prefix)]
    found: list[list[str]] = []
    for name, child in subs[0].choices.items():
        found += _leaves(child, (*prefix, name))
    return found


COMMANDS = _leaves(build_parser())


def test_the_walk_finds_every_command() -> None:
    assert ["simulate"] in COMMANDS and ["manager", "serve"] in COMMANDS
    assert ["app", "demo"] in COMMANDS
    assert {tuple(c) for c in COMMANDS} >= {("experiment", name) for name in EXPERIMENTS}


@pytest.mark.parametrize("argv", COMMANDS, ids=" ".join)
def test_help_imports_no_heavy_library(argv: list[str]) -> None:
    code = ("import sys\nfrom malleable.cli import main\ntry:\n    main(sys.argv[1:])\n"
            "except SystemExit:\n    pass\n"
            f"print(sorted(m for m in {HEAVY!r} if m in sys.modules), file=sys.stderr)")
    env = {**os.environ, "PYTHONPATH": str(Path(malleable.__file__).parents[1])}
    done = subprocess.run([sys.executable, "-c", code, *argv, "--help"], capture_output=True,
                          text=True, timeout=120, check=False, env=env)
    assert "usage: malleable" in done.stdout, done.stderr
    assert done.stderr.strip().splitlines()[-1] == "[]", done.stderr


def test_the_benchmark_times_the_same_commands() -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from benchmarks import bench_help

    assert bench_help.commands(build_parser()) == COMMANDS
    assert 0 < bench_help.cpu(["-c", "pass"], 1) < 10
