"""``malleable coorm serve|launch``: the CooRM service and a launcher, on the network.

``serve`` runs an RMS over the paper's resource model (nC clusters of nH hosts)
on 127.0.0.1; ``launch`` runs one application's launcher against it and prints
one JSON line with what happened. ``python -m malleable.coorm.launch`` is the
same launcher without the rest of the CLI.
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import json
import signal
import socket
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from malleable import argtypes
from malleable.coorm.launch import add_launch_arguments
from malleable.errors import ExternalError, InputError

#: Bounds of the paper's model a service is built for: the links between clusters are
#: nC^2 / 2 (100,000 clusters never finished building), and a cluster's hosts are bounded
#: as an SWF job's size is (1e7).
MAX_CLUSTERS = 1000
MAX_HOSTS = 10_000_000

if TYPE_CHECKING:
    from malleable.coorm.core import CooRMCore


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
    la.set_defaults(func=_run_launch)


def add_serve_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    p.add_argument("--port", type=argtypes.port, default=0,
                   help="port to bind, 0-65535 (default 0: any free)")
    p.add_argument("--clusters", type=argtypes.bounded(1, MAX_CLUSTERS), default=2,
                   help=f"number of clusters nC, 1-{MAX_CLUSTERS} (default 2)")
    p.add_argument("--hosts", type=argtypes.bounded(1, MAX_HOSTS), default=128,
                   help=f"hosts per cluster nH, 1-{MAX_HOSTS:,} (default 128)")
    p.add_argument("--repolicy-interval", type=float, default=1.0,
                   help="run the policy at most once per this many seconds (default 1)")
    p.add_argument("--fair-start", type=float, default=5.0,
                   help="keep a done application's hosts this long (default 5 s)")
    p.add_argument("--kill-grace", type=float, default=1.0,
                   help="kill an application this long after its allocation ends (default 1 s)")
    p.add_argument("--config", default=None, metavar="FILE",
                   help="real views: serve the Slurm and OAR sites of this clusters config "
                        "(as `malleable testbed config` prints) instead of the paper's model; "
                        "starts become Slurm or OAR jobs")


def _run_launch(args: argparse.Namespace) -> int:
    from malleable.coorm.launch import run_launch

    return run_launch(args)


def run_serve(args: argparse.Namespace) -> int:
    from malleable.coorm.core import CooRMCore, CoreConfig
    from malleable.coorm.resources import paper_platform

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

    import asyncio

    previous = signal.signal(signal.SIGTERM, _interrupt)  # stop as on Ctrl-C: clean up below
    try:
        with contextlib.suppress(KeyboardInterrupt):
            asyncio.run(_serve(core, args.host, args.port, ready))
    finally:
        if args.config is not None:
            from malleable.coorm.real import RealCoorm
            if isinstance(core, RealCoorm):
                core.close()  # cancel the jobs still held for applications
        signal.signal(signal.SIGTERM, previous)
    return 0


async def _serve(core: CooRMCore, host: str, port: int,
                 ready: Callable[[str, int], None]) -> None:
    """:func:`~malleable.coorm.service.serve`, its failure to listen as one line: exit 2
    for an address that is not this machine's, 3 for a port in use or not allowed."""
    from malleable.coorm.service import CooRMService

    service = CooRMService(core, host, port)
    try:
        bound = await service.start()
    except OSError as exc:
        raise _bind_error(exc, host, port) from None
    ready(*bound)
    try:
        await service.serve_forever()
    finally:
        await service.close()


def _bind_error(exc: OSError, host: str, port: int) -> InputError | ExternalError:
    reason = exc.strerror or str(exc)
    if isinstance(exc, socket.gaierror) or exc.errno == errno.EADDRNOTAVAIL:
        return InputError(f"--host {host}: not an address of this machine ({reason}); "
                          "give one of its addresses, e.g. 127.0.0.1")
    if exc.errno == errno.EADDRINUSE:
        return ExternalError(f"--port {port}: address {host}:{port} already in use; "
                             "give another --port, or 0 for any free one")
    return ExternalError(f"cannot listen on {host}:{port} (--host, --port): {reason}")


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt
