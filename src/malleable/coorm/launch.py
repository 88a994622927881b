"""``python -m malleable.coorm.launch --connect HOST:PORT ...``: one CooRM launcher process.

The same launcher as ``malleable coorm launch`` (:mod:`malleable.commands.coorm` adds
these options to the CLI), without the rest of the CLI: it connects to a CooRM
service, selects resources on the views it sends, runs the payload and prints one
JSON line with what happened.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from typing import TYPE_CHECKING

from malleable.errors import InputError

if TYPE_CHECKING:  # imported when a launcher runs (numpy): not while the CLI parser is built
    from malleable.coorm.launchers import Launcher


def add_launch_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--connect", required=True, metavar="HOST:PORT", help="the CooRM service")
    p.add_argument("--name", default="app", help="a label for the RMS logs")
    p.add_argument("--kind", choices=("rigid", "amdahl", "cem"), default="rigid",
                   help="application model (default rigid)")
    p.add_argument("--hosts", type=int, default=1,
                   help="host count (rigid) or reference host count (amdahl, cem)")
    p.add_argument("--runtime", type=float, default=1.0,
                   help="run time in seconds at --hosts on a speed-1 cluster (default 1)")
    p.add_argument("--walltime", type=float, default=None,
                   help="requested time at --hosts (default: --runtime)")
    p.add_argument("--serial", type=float, default=0.05,
                   help="Amdahl serial fraction (default 0.05)")
    p.add_argument("--clusters", default=None, help="only these cluster ids (comma-separated)")
    p.add_argument("--min-hosts", type=int, default=1, help="skip clusters with fewer hosts")
    p.add_argument("--adaptation-delay", type=float, default=0.0,
                   help="wait this long after a new view before re-selecting (default 0)")
    p.add_argument("command", nargs=argparse.REMAINDER,
                   help="payload command (after --); default: sleep for the model's run time")


def build_launcher(args: argparse.Namespace) -> Launcher:
    """The launcher the ``launch`` options describe; InputError on a bad value."""
    from malleable.coorm.launchers import Launcher
    from malleable.coorm.protocol import Filter
    from malleable.workloads.coorm_apps import Amdahl, App, Cem, Rigid

    walltime = args.runtime if args.walltime is None else args.walltime
    try:
        app: App
        if args.kind == "rigid":
            app = Rigid(args.hosts, args.runtime, walltime)
        elif args.kind == "amdahl":
            app = Amdahl(args.hosts, args.runtime, walltime, args.serial)
        else:
            app = Cem.like(args.hosts, args.runtime, per_iteration=max(args.runtime / 100, 1e-3))
        clusters = tuple(c for c in args.clusters.split(",") if c) if args.clusters else None
        return Launcher(args.name, app, Filter(min_hosts=args.min_hosts, clusters=clusters),
                        args.adaptation_delay)
    except ValueError as exc:
        raise InputError(f"bad launcher option: {exc}") from None


def parse_endpoint(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit():
        raise InputError(f"--connect {text!r}: expected HOST:PORT, e.g. 127.0.0.1:7000")
    return host or "127.0.0.1", int(port)


def run_launch(args: argparse.Namespace) -> int:
    import asyncio

    from malleable.coorm.client import run_launcher

    host, port = parse_endpoint(args.connect)
    launcher = build_launcher(args)
    command = [c for c in args.command if c != "--"] or None
    result = asyncio.run(run_launcher(host, port, launcher, command))
    print(json.dumps(asdict(result), sort_keys=True), flush=True)
    if result.killed:
        return 3
    return 0 if result.exit_code in (0, None) else 1


def main(argv: list[str] | None = None) -> int:
    """``python -m malleable.coorm.launch``: one launcher, errors as one line."""
    from malleable.errors import MalleableError

    parser = argparse.ArgumentParser(prog="python -m malleable.coorm.launch",
                                     description="Run one CooRM launcher.")
    add_launch_arguments(parser)
    args = parser.parse_args(argv)
    try:
        return run_launch(args)
    except MalleableError as exc:
        print(f"coorm launch: error: {exc}", file=sys.stderr)
        return exc.exit_code


if __name__ == "__main__":
    raise SystemExit(main())
