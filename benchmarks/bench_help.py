"""CPU time of every command's ``--help`` (issue 40: each under 0.15 s CPU).

Run ``python3 benchmarks/bench_help.py [--repeat N] [--json]``. Each command's help runs
``N`` times (default 5) in a fresh interpreter; the least CPU time (user + system, of the
child) is kept, as the one least disturbed by other load. The baseline, measured in the
same run the same way, is ``python3 -c "import malleable"`` (the interpreter and the
package's ``__init__``): the ratio says what a command's parser adds. Under load every figure grows;
compare ratios, or run on a quiet machine for the absolute target.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
sys.path.insert(0, str(SRC))

from malleable.cli import build_parser  # noqa: E402

TARGET_S = 0.15


def commands(parser: argparse.ArgumentParser, prefix: tuple[str, ...] = ()) -> list[list[str]]:
    """Every leaf command of the parser (``experiment koala``, ``manager serve`` ...)."""
    subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    if not subs:
        return [list(prefix)]
    found: list[list[str]] = []
    for name, child in subs[0].choices.items():
        found += commands(child, (*prefix, name))
    return found


def cpu(argv: list[str], repeat: int) -> float:
    """The least CPU seconds of ``python3 ARGV`` over ``repeat`` runs."""
    best = float("inf")
    env = {**os.environ, "PYTHONPATH": str(SRC)}
    for _ in range(repeat):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        subprocess.run([sys.executable, *argv], stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, check=False, env=env, timeout=60)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        best = min(best, after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return best


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    base = cpu(["-c", "import malleable"], args.repeat)
    rows = [{"command": "malleable --help",
             "cpu_s": cpu(["-m", "malleable", "--help"], args.repeat)}]
    for argv in commands(build_parser()):
        rows.append({"command": " ".join(["malleable", *argv, "--help"]),
                     "cpu_s": cpu(["-m", "malleable", *argv, "--help"], args.repeat)})
    for row in rows:
        row["ratio"] = row["cpu_s"] / base if base > 0 else float("nan")
        row["under_target"] = row["cpu_s"] < TARGET_S
    if args.json:
        print(json.dumps({"baseline_s": base, "target_s": TARGET_S, "commands": rows}))
    else:
        print(f"baseline (import malleable): {base:.3f} s CPU; target {TARGET_S} s")
        for row in rows:
            mark = "" if row["under_target"] else "  OVER"
            print(f"{row['cpu_s']:.3f} s  x{row['ratio']:.2f}  {row['command']}{mark}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
