#!/usr/bin/env python3
"""One ``malleable simulate`` run on two source trees, in interleaved pairs (issue 36).

    python3 benchmarks/bench_pairs.py --base ../main/src --pairs 2 -- \\
        --policy easy --workload ../shared/traces/RICC-2010-2.swf.gz --no-figures --json

Runs ``python3 -m malleable simulate ARGS --out DIR`` with ``PYTHONPATH=TREE`` for this
tree (``--tree``, default this checkout's ``src``) and ``--base``, alternately (base
first in odd pairs, ours first in even ones), each as its own process; prints, per run,
the CPU time (user + system) and peak RSS of that process (``os.wait4``) and the load
average, then the minimum CPU of each side, their ratio and whether ``jobs.csv``,
``summary.json`` and the ``--json`` output are byte-identical between every run.
Timing on a shared machine is noisy: quote the load with the figures.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent


def run(tree: Path, args: list[str], out: Path, timeout: float) -> tuple[float, float, bytes]:
    """(CPU seconds, peak RSS MiB, stdout) of one simulate run."""
    env = dict(os.environ, PYTHONPATH=str(tree))
    with tempfile.TemporaryFile() as stdout:
        proc = subprocess.Popen([sys.executable, "-m", "malleable", "simulate", *args,
                                 "--out", str(out)], env=env, stdout=stdout,
                                stderr=subprocess.DEVNULL)
        try:
            _, status, usage = os.wait4(proc.pid, 0)
        except BaseException:
            proc.kill()
            raise
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode != 0:
            raise SystemExit(f"bench_pairs: {tree}: simulate exited {proc.returncode}")
        stdout.seek(0)
        text = stdout.read()
    del timeout
    return usage.ru_utime + usage.ru_stime, usage.ru_maxrss / 1024, text


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--base", type=Path, required=True, help="the other tree's src")
    parser.add_argument("--tree", type=Path, default=HERE.parent / "src")
    parser.add_argument("--pairs", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=3600.0)
    parser.add_argument("args", nargs=argparse.REMAINDER, help="-- then simulate's options")
    ns = parser.parse_args(argv)
    args = ns.args[1:] if ns.args[:1] == ["--"] else ns.args
    work = Path(tempfile.mkdtemp(prefix="bench-pairs-"))
    sides = {"ours": ns.tree.resolve(), "base": ns.base.resolve()}
    cpu: dict[str, list[float]] = {"ours": [], "base": []}
    outputs: dict[tuple[str, str], bytes] = {}
    same = True
    for pair in range(ns.pairs):
        order = ["base", "ours"] if pair % 2 == 0 else ["ours", "base"]
        for side in order:
            out = work / f"{side}-{pair}"
            seconds, mib, text = run(sides[side], args, out, ns.timeout)
            cpu[side].append(seconds)
            load = os.getloadavg()[0]
            print(f"pair {pair + 1} {side}: {seconds:.2f} s CPU, {mib:.0f} MiB peak, "
                  f"load {load:.1f}", flush=True)
            for name, data in (("jobs.csv", (out / "jobs.csv").read_bytes()),
                               ("summary.json", (out / "summary.json").read_bytes()),
                               ("stdout", text)):
                first = outputs.setdefault(("any", name), data)
                if first != data:
                    same = False
                    print(f"  {name} DIFFERS from the first run's", flush=True)
    best = {side: min(values) for side, values in cpu.items()}
    print(f"min CPU: ours {best['ours']:.2f} s, base {best['base']:.2f} s, "
          f"base/ours {best['base'] / best['ours']:.2f}x; outputs "
          f"{'SAME' if same else 'DIFFER'} (work folder {work})")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
