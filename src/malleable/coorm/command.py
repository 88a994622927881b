"""``malleable coorm serve|launch``: the CooRM service and a launcher, on the network.

``serve`` runs an RMS over the paper's resource model (nC clusters of nH hosts)
on 127.0.0.1; ``launch`` runs one application's launcher against it and prints
one JSON line with what happened. ``python -m malleable.coorm.launch`` is the
same launcher without the rest of the CLI.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import signal
import sys
from dataclasses import asdict
from typing import Any

from malleable.coorm.apps import Amdahl, App, Cem, Rigid
from malleable.coorm.client import run_launcher
from malleable.coorm.core import CooRMCore, CoreConfig
from malleable.coorm.launchers import Launcher
from malleable.coorm.protocol import Filter
from malleable.coorm.resources import paper_platform
from malleable.coorm.service import serve
from malleable.errors import InputError


def register(sub: Any) -> None:
    parser = sub.add_parser("coorm", help="CooRM service and launchers on the network",
                            description="Run a CooRM RMS on TCP, or one launcher against it.")
    coorm_sub = parser.add_subparsers(dest="coorm_command", metavar="ACTION")
    coorm_sub.required = True
    s = coorm_sub.add_parser("serve", help="run a CooRM service on TCP (JSON lines)",
                             description="Run a CooRM RMS over the paper's resource model "
                                         "until interrupted.")
    add_serve_arguments(s)
    s.set_defaults(func=run_serve)
    la = coorm_sub.add_parser("launch", help="run one application's launcher",
                              description="Connect to a CooRM service, select resources on "
                                          "the views it sends, run the payload, report JSON.")
    add_launch_arguments(la)
    la.set_defaults(func=run_launch)


def add_serve_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=0, help="port to bind (default 0: any free)")
    p.add_argument("--clusters", type=int, default=2, help="number of clusters nC (default 2)")
    p.add_argument("--hosts", type=int, default=128, help="hosts per cluster nH (default 128)")
    p.add_argument("--repolicy-interval", type=float, default=1.0,
                   help="run the policy at most once per this many seconds (default 1)")
    p.add_argument("--fair-start", type=float, default=5.0,
                   help="keep a done application's hosts this long (default 5 s)")
    p.add_argument("--kill-grace", type=float, default=1.0,
                   help="kill an application this long after its allocation ends (default 1 s)")
    p.add_argument("--config", default=None, metavar="FILE",
                   help="real views: serve the Slurm sites of this clusters config (as "
                        "`malleable testbed config` prints) instead of the paper's model; "
                        "starts become Slurm jobs")


def run_serve(args: argparse.Namespace) -> int:
    if args.clusters < 1 or args.hosts < 1:
        raise InputError("--clusters and --hosts must be at least 1")
    try:
        config = CoreConfig(args.repolicy_interval, args.fair_start, args.kill_grace)
    except ValueError as exc:
        raise InputError(str(exc)) from None
    core: CooRMCore
    if args.config is not None:
        from malleable.config import load_config
        from malleable.coorm.real import real_core
        core = real_core(load_config(args.config), config)
    else:
        core = CooRMCore(paper_platform(args.clusters, args.hosts), config)

    def ready(host: str, port: int) -> None:
        print(json.dumps({"listening": f"{host}:{port}"}), flush=True)

    previous = signal.signal(signal.SIGTERM, _interrupt)  # stop as on Ctrl-C: clean up below
    try:
        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(serve(core, args.host, args.port, ready))
    finally:
        if args.config is not None:
            from malleable.coorm.real import SlurmCoorm
            if isinstance(core, SlurmCoorm):
                core.close()  # cancel the Slurm jobs still held for applications
        signal.signal(signal.SIGTERM, previous)
    return 0


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


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
