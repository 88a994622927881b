"""The CLI loads only the command it runs: a simulation pays for no plots, SSH or tables."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from malleable.cli import COMMAND_MODULES, build_parser

SRC = Path(__file__).resolve().parents[2] / "src"


def test_simulate_json_imports_no_plotting_ssh_or_rich(tmp_path: Path) -> None:
    code = ("import sys\n"
            "from malleable.cli import main\n"
            "main(['simulate', '--policy', 'fcfs', '--platform', '16', '--workload', 'wm', "
            "'--json'])\n"
            "heavy = ('matplotlib', 'paramiko', 'rich', 'malleable.adapters.slurm')\n"
            "print(sorted(m for m in heavy if m in sys.modules))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=120, env={**os.environ, "PYTHONPATH": str(SRC)},
                          cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines()[-1] == "[]"


def test_a_named_command_gets_the_same_parser_as_in_the_whole_cli() -> None:
    for module in COMMAND_MODULES:
        command = module.rsplit(".", 1)[-1]
        alone = build_parser(command)
        (sub,) = [a for a in alone._actions if a.dest == "command"]
        assert list(sub.choices) == [command]  # type: ignore[attr-defined]
    whole = build_parser(None)
    (sub,) = [a for a in whole._actions if a.dest == "command"]
    assert list(sub.choices) == [m.rsplit(".", 1)[-1] for m in COMMAND_MODULES]  # type: ignore[attr-defined]
    assert build_parser("no-such-command") is not None  # argparse reports it, with every choice
