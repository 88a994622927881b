"""``malleable testbed up|status|exec|config|down|list|build``: the containerized Slurm sites."""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import sys
import time
from typing import Any

from malleable.errors import InputError
from malleable.testbed.docker import Docker
from malleable.testbed.info import SiteStatus, TestbedStatus
from malleable.testbed.runtime import Testbed, list_testbeds
from malleable.testbed.topology import BUILTIN, load_topology
from malleable.testbed.versions import check_topology

_PHASES = {"images": "building images", "containers": "containers healthy",
           "nodes": "nodes idle"}


def _name(p: argparse.ArgumentParser) -> None:
    p.add_argument("--name", default="default",
                   help="testbed name: several testbeds live side by side (default: default)")


def register(sub: Any) -> None:
    p = sub.add_parser(
        "testbed", help="bring up, inspect and remove the containerized Slurm and OAR clusters",
        description="A containerized multi-cluster Slurm system: one slurmctld per site, "
                    "emulated nodes (one slurmd each), shared slurmdbd accounting, SSH and "
                    "Open MPI. See docs/testbed.md.")
    tsub = p.add_subparsers(dest="action", metavar="ACTION")
    tsub.required = True
    _register_up(tsub)
    _register_use(tsub)
    _register_manage(tsub)


def _register_use(tsub: Any) -> None:
    st = tsub.add_parser("status", help="sites, node states and queues of a testbed",
                         description="Print each site's controller, nodes by state and jobs.")
    _name(st)
    st.add_argument("--json", action="store_true",
                    help="print one JSON object (its 'sites' object is keyed by site name)")
    st.set_defaults(func=run_status)
    ex = tsub.add_parser("exec", help="run a command in a site (its controller/login node)",
                         description="Run CMD in SITE's controller container, or in the named "
                                     "container (vu-c0) or node's container (vu-n003). "
                                     "Example: malleable testbed exec vu -- sinfo")
    _name(ex)
    ex.add_argument("--user", default="root",
                    help="user to run as: root (default), the service account malleable, or "
                         "an ordinary user alice, bob or carol (in their home)")
    ex.add_argument("site", metavar="SITE", help="site, container hostname or node name")
    ex.add_argument("cmd", nargs=argparse.REMAINDER, metavar="-- CMD", help="the command")
    ex.set_defaults(func=run_exec)
    cf = tsub.add_parser("config", help="print the clusters config (TOML) of a testbed",
                         description="Print the clusters config that the manager and the other "
                                     "commands take with --config FILE: per site the SSH "
                                     "endpoint, user, key, known_hosts and Slurm cluster name; "
                                     "with --rest, the Slurm sites' slurmrestd URL and a token "
                                     "file of the service account instead of SSH.")
    _name(cf)
    cf.add_argument("--rest", action="store_true",
                    help="reach the Slurm sites through slurmrestd (transport = \"rest\"): "
                         "makes a token file per site with `scontrol token`")
    cf.add_argument("--token-lifespan", type=int, default=86400, metavar="SECONDS",
                    help="lifetime of the REST tokens (default 86400: a day)")
    cf.set_defaults(func=run_config)


def _register_manage(tsub: Any) -> None:
    dn = tsub.add_parser("down", help="cancel every job and remove a testbed entirely",
                         description="Cancel every job, then remove the containers, the network "
                                     "and the state directory (secrets included). Images stay.")
    _name(dn)
    dn.set_defaults(func=run_down)
    ls = tsub.add_parser("list", help="the testbeds that have containers on this machine",
                         description="List every testbed with containers on this Docker "
                                     "engine, with how many of them run.")
    ls.add_argument("--json", action="store_true", help="print one JSON object")
    ls.set_defaults(func=run_list)
    bd = tsub.add_parser("build", help="build the base and testbed images (reused when present)",
                         description="Build the Debian base image (mmdebstrap) when no "
                                     "image of the Slurm version's suite is present, then the "
                                     "testbed image when its sources changed.")
    _build_options(bd)
    bd.set_defaults(func=run_build)


def _build_options(p: argparse.ArgumentParser) -> None:
    from malleable.testbed.versions import DEFAULT, SUITES

    choices = ", ".join(f"{v} (Debian {s})" for v, s in SUITES.items())
    p.add_argument("--slurm", default=DEFAULT, metavar="{" + ",".join(SUITES) + "}",
                   help=f"Slurm version: {choices}; default {DEFAULT}")
    p.add_argument("--base-image", metavar="IMAGE",
                   help="base image (default: debian:SUITE if present, else a local "
                        "mmdebstrap build of the version's Debian suite)")
    p.add_argument("--rebuild", action="store_true",
                   help="rebuild the testbed image even if it is up to date")


def _register_up(tsub: Any) -> None:
    up = tsub.add_parser(
        "up", help="build what is missing, start the sites, wait until every node is idle",
        description="Bring up a testbed: build images when missing (first run: a few minutes), "
                    "generate secrets, start the containers, wait until every slurmctld answers "
                    "and every node is idle, and print how to reach the sites.")
    _name(up)
    up.add_argument("--topology", default="das3", metavar="{" + ",".join(BUILTIN) + ",FILE}",
                    help="a built-in topology or a TOML file (default: das3)")
    up.add_argument("--scale", type=float, default=1.0, metavar="F",
                    help="multiply every site's node count by F in (0, 1] (default 1)")
    up.add_argument("--timeout", type=float, default=600.0, metavar="S",
                    help="seconds to wait for health (default 600)")
    up.add_argument("--json", action="store_true", help="print the status as JSON")
    _build_options(up)
    up.set_defaults(func=run_up)


def run_up(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    if not math.isfinite(args.timeout) or args.timeout <= 0:
        raise InputError("--timeout must be a positive number of seconds")
    topology = load_topology(args.topology).scaled(args.scale)
    check_topology(topology, args.slurm)
    tb = Testbed(args.name)
    started = time.monotonic()
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
               TimeElapsedColumn())
    with Progress(*columns, console=Console(stderr=True), transient=True) as bar:
        tasks: dict[str, Any] = {}

        def report(phase: str, done: int, total: int) -> None:
            if phase not in tasks:
                tasks[phase] = bar.add_task(_PHASES.get(phase, phase), total=total)
            bar.update(tasks[phase], completed=done, total=total)

        status = tb.up(topology, base_image=args.base_image, rebuild=args.rebuild,
                       timeout=args.timeout, progress=report, slurm=args.slurm)
    if args.json:
        print(json.dumps(status.to_json(), indent=2))
    else:
        print_status(status)
        print(f"up in {time.monotonic() - started:.0f} s; clusters config: malleable testbed "
              f"config --name {tb.name} > clusters.toml")
    return 0


def print_status(status: TestbedStatus) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"testbed {status.name} ({status.topology}): "
                        f"{'up' if status.up else 'NOT READY'}")
    for col in ("site", "kind", "version", "controller", "nodes", "idle", "states", "jobs",
                "ssh", "rest"):
        table.add_column(col)
    for name, s in status.sites.items():
        ssh = f"{s.endpoint.host}:{s.endpoint.port}" if s.endpoint else "-"
        states = ", ".join(f"{k} {v}" for k, v in s.node_states.items()) or s.error or "-"
        table.add_row(name, s.kind, s.slurm_version or "-",
                      f"{s.controller} ({s.controller_health or s.controller_state})",
                      str(s.nodes), str(s.idle), states, str(s.jobs), ssh,
                      _rest_cell(s))
    Console().print(table)
    for c in status.containers:
        if not c.healthy:
            print(f"container {c.hostname}: {c.state}, {c.health or 'no health check'}")
    if not status.containers:
        print("no containers: bring the testbed up again, or take it down")


def _rest_cell(s: SiteStatus) -> str:
    """``URL health`` of a site's slurmrestd; ``-`` for a site without (its endpoint has no
    REST URL and its status no REST health: an OAR site)."""
    url = s.endpoint.rest_url.removeprefix("http://") if s.endpoint else ""
    return f"{url} {s.rest}".strip() or "-"


def run_status(args: argparse.Namespace) -> int:
    status = Testbed(args.name).status()
    if args.json:
        print(json.dumps(status.to_json(), indent=2))
    else:
        print_status(status)
    return 0 if status.up else 3


def run_exec(args: argparse.Namespace) -> int:
    cmd = list(args.cmd)
    if cmd[:1] == ["--"]:
        cmd = cmd[1:]
    tb = Testbed(args.name)
    argv = tb.exec_argv(args.site, cmd, user=args.user, interactive=True,
                        tty=sys.stdin.isatty() and sys.stdout.isatty())
    return subprocess.call(argv)


def run_config(args: argparse.Namespace) -> int:
    if args.token_lifespan < 60:
        raise InputError(f"--token-lifespan must be at least 60 s, not {args.token_lifespan}")
    sys.stdout.write(Testbed(args.name).config_toml(args.rest, args.token_lifespan))
    return 0


def run_down(args: argparse.Namespace) -> int:
    tb = Testbed(args.name)
    _check_exists(tb)
    from rich.console import Console

    with Console(stderr=True).status(f"taking testbed {tb.name} down"):
        tb.down()
    print(f"testbed {tb.name} removed")
    return 0


def _check_exists(tb: Testbed) -> None:
    """InputError (exit 2, nothing done) for a testbed with neither a state directory nor
    containers: `down` must not report a removal that did not happen."""
    if tb.state.path.exists() or tb.containers():
        return
    others = ", ".join(list_testbeds(tb.docker)) or "none"
    raise InputError(f"no testbed named {tb.name!r}: nothing to take down (testbeds with "
                     f"containers here: {others})")


def run_list(args: argparse.Namespace) -> int:
    found = list_testbeds()
    if args.json:
        print(json.dumps(found))
        return 0
    for name, counts in found.items():
        print(f"{name}\t{counts['running']}/{counts['containers']} containers running")
    return 0


def run_build(args: argparse.Namespace) -> int:
    from rich.console import Console

    from malleable.testbed import images
    from malleable.testbed.versions import check

    check(args.slurm)
    docker = Docker()
    docker.require_engine()
    with Console(stderr=True).status(f"building the testbed images (Slurm {args.slurm})"):
        image = images.ensure_image(docker, args.base_image, force=args.rebuild,
                                    slurm=args.slurm)
    print(image)
    return 0
