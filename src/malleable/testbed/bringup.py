"""Bring a testbed up, wait until it is healthy, and take it down without leftovers.

Bring-up: build the images when missing, generate secrets and configuration into the
state directory, ``compose up``, then wait on health (every container's healthcheck, then
every node idle in ``sinfo``) until a deadline. On failure, diagnostics (sinfo, squeue,
log tails) go to ``logs/`` in the state directory and into the error.
Take-down: cancel every job first (job steps can outlive slurmd), then remove the
containers, the network and the state directory.
"""

from __future__ import annotations

import json
import logging
import random
import shutil
import socket
import time
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING

import malleable.testbed.accounts as accounts
import malleable.testbed.images as images
import malleable.testbed.info as info
import malleable.testbed.secrets as secrets
import malleable.testbed.sitekinds as sitekinds
import malleable.testbed.versions as versions
from malleable.errors import ExternalError, InputError
from malleable.kinds import DEFAULT
from malleable.testbed.compose import compose_project
from malleable.testbed.slurmconf import render_slurmdbd_conf
from malleable.testbed.state import Record, read_record, write_record
from malleable.testbed.topology import Topology

if TYPE_CHECKING:
    from malleable.testbed.handle import Progress
    from malleable.testbed.handle import TestbedHandle as Testbed
    from malleable.testbed.info import Container

logger = logging.getLogger(__name__)

POLL = 1.0
COMPOSE_UP_TIMEOUT = 600.0
CANCEL_WAIT = 30.0
#: The published sshd ports are drawn from here up to the kernel's ephemeral range.
PORT_FLOOR = 20000
#: How often ``compose up`` chooses the ports again when one was taken meanwhile.
PORT_RETRIES = 2
#: What Docker says when a port it should publish is bound already.
PORT_TAKEN = "port is already allocated"
#: Node states of a healthy node that may be running jobs (sinfo %T, lowercase).
USABLE = frozenset({"idle", "allocated", "mixed", "completing"})


def _noop(phase: str, done: int, total: int) -> None:
    return None


def prepare(tb: Testbed, topology: Topology, image: str, slurm: str = versions.DEFAULT) -> None:
    """Write secrets, Slurm configuration, compose file and record into the state dir."""
    st = tb.state
    if st.path.exists():
        shutil.rmtree(st.path)
    st.path.mkdir(parents=True, mode=0o700)
    secrets.generate(st.secrets, tb.name)
    dbd_tpl = (images.testbed_dir() / "slurm" / "slurmdbd.conf.in").read_text(encoding="utf-8")
    for site in topology.sites:
        (st.etc / site.name).mkdir(parents=True)
        sitekinds.of(site.kind).write_config(site, st.etc / site.name, images.testbed_dir())
    (st.etc / "accounting").mkdir(parents=True)
    dbpass = (st.secrets / secrets.DB_PASS).read_text(encoding="ascii")
    dbd = st.etc / "accounting" / "slurmdbd.conf"
    dbd.write_text(render_slurmdbd_conf(dbd_tpl, dbpass), encoding="utf-8")
    dbd.chmod(0o600)
    secrets.write_known_hosts(st.secrets, _internal_names(topology))
    write_compose(tb, topology, image)
    write_record(st, Record(tb.name, tb.project, topology, image, slurm))


def write_compose(tb: Testbed, topology: Topology, image: str) -> None:
    """The compose file, each controller's sshd published on a port free now."""
    doc = compose_project(topology, tb.name, image, tb.state.path,
                          dict(zip((s.name for s in topology.sites),
                                   free_ports(len(topology.sites)), strict=True)))
    tb.state.compose_file.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")


def free_ports(count: int, host: str = info.PUBLISH_HOST,
               span: tuple[int, int] | None = None) -> list[int]:
    """``count`` distinct TCP ports free on ``host`` now, for the controllers' published sshd.

    They are drawn at random from ``span`` (default: from PORT_FLOOR up to the kernel's
    ephemeral range), not left to the kernel: the kernel's choice is in its ephemeral
    range, which is also where Docker picks the ports it publishes itself (slurmrestd's),
    so another testbed coming up at the same time could be given the same port between
    this choice and ``compose up`` (CI saw "Bind for 127.0.0.1:32785 failed: port is
    already allocated"). Something else may still take a port first: ``up`` then chooses
    again (``PORT_RETRIES``)."""
    low, high = span or (PORT_FLOOR, _ephemeral_start())
    if span is None and high - low < 100 * count:  # no room below it: the kernel's choice
        low, high = 0, 0
    held: list[socket.socket] = []
    draw = random.Random()
    try:
        for _ in range(50 * count):
            if len(held) == count:
                break
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            try:
                sock.bind((host, draw.randrange(low, high) if high else 0))
            except OSError:
                sock.close()
                continue
            held.append(sock)
        if len(held) < count:
            raise ExternalError(f"found only {len(held)} of {count} free TCP ports on {host} "
                                f"in {low}-{high}; free some, or take testbeds down")
        return [sock.getsockname()[1] for sock in held]
    finally:
        for sock in held:
            sock.close()


def _ephemeral_start(path: Path = Path("/proc/sys/net/ipv4/ip_local_port_range")) -> int:
    """The first port of the kernel's ephemeral range (32768 when it cannot be read)."""
    try:
        return int(path.read_text(encoding="ascii").split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def compose_up(tb: Testbed, topology: Topology, image: str) -> None:
    """``compose up``; when a published port was taken since it was chosen, choose the
    ports again and retry (at most PORT_RETRIES times), saying so in the log."""
    for attempt in range(PORT_RETRIES + 1):
        try:
            tb.docker.compose(tb.project, str(tb.state.compose_file), "up", "--detach",
                              "--remove-orphans", timeout=COMPOSE_UP_TIMEOUT)
            return
        except ExternalError as exc:
            if PORT_TAKEN not in str(exc) or attempt == PORT_RETRIES:
                raise
            logger.warning("testbed %s: a published port was taken since it was chosen "
                           "(%s); choosing again", tb.name, PORT_TAKEN)
            tb.docker.compose(tb.project, str(tb.state.compose_file), "down",
                              "--remove-orphans", timeout=COMPOSE_UP_TIMEOUT, check=False)
            write_compose(tb, topology, image)


def _internal_names(topology: Topology) -> list[str]:
    names = ["slurmdbd"]
    for site in topology.sites:
        names.append(site.controller)
        names.extend(site.compute_hosts())
        names.extend(site.node_names())
        names.extend(sitekinds.of(site.kind).ssh_names(site))
    return names


def finalize(tb: Testbed) -> None:
    """Pin the host key to every address and published port; write clusters.toml."""
    found = tb.containers()
    names = _internal_names(tb.record().topology)
    for c in found:
        names.extend([c.hostname, c.address or "", *c.aliases])
        if c.ssh_port is not None:
            names.append(f"[{info.PUBLISH_HOST}]:{c.ssh_port}")
    secrets.write_known_hosts(tb.state.secrets, names)
    tb.state.clusters_file.write_text(tb.config_toml(), encoding="utf-8")


def _check_same(tb: Testbed, topology: Topology, slurm: str) -> None:
    record = read_record(tb.state)
    recorded = record.topology
    if recorded != topology:
        raise InputError(f"testbed {tb.name!r} is already up with topology {recorded.name!r};"
                         f" take it down first (malleable testbed down --name {tb.name}) or "
                         "use another --name")
    if record.slurm != slurm:
        raise InputError(f"testbed {tb.name!r} is already up with Slurm {record.slurm}; take "
                         f"it down first (malleable testbed down --name {tb.name}) or use "
                         "another --name")


def up(tb: Testbed, topology: Topology, *, base_image: str | None, rebuild: bool,
       timeout: float, progress: Progress | None,
       slurm: str = versions.DEFAULT) -> info.TestbedStatus:
    report = progress or _noop
    versions.check_topology(topology, slurm)
    tb.docker.require_engine()
    existing = tb.containers()
    if existing and tb.state.exists():
        _check_same(tb, topology, slurm)
        logger.info("testbed %s is already up; checking its health", tb.name)
        settled = USABLE  # nodes may be running jobs: they only have to answer
    else:
        settled = frozenset({"idle"})
        if existing:
            _remove_leftovers(tb, existing)
        report("images", 0, 1)
        image = images.ensure_image(tb.docker, base_image, force=rebuild, slurm=slurm)
        report("images", 1, 1)
        prepare(tb, topology, image, slurm)
        report("containers", 0, 1)
        compose_up(tb, topology, image)
    wait_ready(tb, topology, time.monotonic() + timeout, report, settled)
    if settled != USABLE:  # a fresh testbed: its accounting is empty
        accounts.setup(tb, [s.name for s in topology.sites
                            if sitekinds.of(s.kind).accounting])
    finalize(tb)
    return tb.status()


def wait_ready(tb: Testbed, topology: Topology, deadline: float, report: Progress,
               settled: frozenset[str] = frozenset({"idle"})) -> None:
    """Wait until every container is healthy and every node in a ``settled`` state (idle
    for a fresh testbed), or fail with diagnostics."""
    expected = topology.total_containers
    while True:
        found = tb.containers()
        dead = [c.hostname for c in found if c.state in ("exited", "dead")]
        if dead:
            _fail(tb, f"container(s) {', '.join(dead)} stopped")
        healthy = sum(1 for c in found if c.healthy and c.health == "healthy")
        report("containers", healthy, expected)
        if healthy == expected:
            break
        _pause(tb, deadline, f"{healthy} of {expected} containers healthy")
    while True:
        ready = 0
        for site in topology.sites:
            ready += sum(1 for s in node_states(tb, site.name, site.kind).values()
                         if s in settled)
        report("nodes", ready, topology.total_nodes)
        if ready == topology.total_nodes:
            return
        _pause(tb, deadline, f"{ready} of {topology.total_nodes} nodes {'/'.join(sorted(settled))}")


def node_states(tb: Testbed, site: str, kind: str) -> dict[str, str]:
    """Node -> state (Slurm's words; an OAR node that is Alive counts as ``idle``): the
    kind's :meth:`~malleable.testbed.sitekinds.TestbedKind.node_states`."""
    return sitekinds.of(kind).node_states(tb, site)


def _pause(tb: Testbed, deadline: float, what: str) -> None:
    remaining = deadline - time.monotonic()
    if remaining <= 0:
        _fail(tb, f"not ready before the deadline: {what}")
    time.sleep(min(POLL, remaining))


def _fail(tb: Testbed, what: str) -> None:
    text = diagnostics(tb)
    tb.state.logs.mkdir(parents=True, exist_ok=True)
    path = tb.state.logs / f"failure-{time.strftime('%Y%m%d-%H%M%S')}.txt"
    path.write_text(text, encoding="utf-8")
    logger.info("testbed %s: %s\n%s", tb.name, what, text)
    raise ExternalError(f"testbed {tb.name!r}: {what}; diagnostics in {path}; remove it with: "
                        f"malleable testbed down --name {tb.name}")


def diagnostics(tb: Testbed) -> str:
    """Container states, sinfo and squeue of every site, and the ends of the daemons' logs."""
    found = tb.containers()
    parts = [sitekinds.section("containers", "\n".join(
        f"{c.hostname:16} {c.state:10} {c.health or '-':10} {c.address or '-'}" for c in found))]
    for c in found:
        if not c.running:
            logs = tb.docker.docker_cmd("logs", "--tail", "40", c.id, check=False)
            parts.append(sitekinds.section(f"{c.hostname}: docker logs",
                                           logs.stdout + logs.stderr))
            continue
        parts.extend(_kind(tb, c.site).diagnose(tb, c))
    return "\n".join(parts)


def _kind(tb: Testbed, site: str | None) -> sitekinds.TestbedKind:
    """The testbed side of a container's site; the default kind's for the shared
    accounting service (no site) or a site the record does not hold."""
    try:
        return sitekinds.of(tb.record().topology.site(site).kind if site else DEFAULT)
    except InputError:
        return sitekinds.of(DEFAULT)


def cancel_all_jobs(tb: Testbed, controllers: Iterable[Container], timeout: float) -> None:
    """Cancel every job of every site (scancel on a Slurm site) and wait (bounded) until
    the queues are empty (a kind's :meth:`~malleable.testbed.sitekinds.TestbedKind.cancel_jobs`
    says whether to wait: OAR sites need none of this, their jobs' processes live in the
    site's containers)."""
    running = [c for c in controllers if c.running and _kind(tb, c.site).cancel_jobs(tb, c)]
    deadline = time.monotonic() + timeout
    while running:
        running = [c for c in running if _kind(tb, c.site).has_jobs(tb, c)]
        if running and time.monotonic() >= deadline:
            logger.warning("jobs still in the queue of %s after %.0f s",
                           ", ".join(c.hostname for c in running), timeout)
            return
        if running:
            time.sleep(POLL)


def _remove_leftovers(tb: Testbed, found: list[Container]) -> None:
    if found:
        tb.docker.docker_cmd("rm", "--force", "--volumes", *(c.id for c in found), timeout=120)
    nets = tb.docker.docker_cmd("network", "ls", "--quiet", "--filter",
                                f"label=com.docker.compose.project={tb.project}").stdout.split()
    if nets:
        tb.docker.docker_cmd("network", "rm", *nets, timeout=60)
    volumes = tb.docker.docker_cmd("volume", "ls", "--quiet", "--filter",
                                   f"label=com.docker.compose.project={tb.project}").stdout.split()
    if volumes:  # the sites' /home volumes, when compose did not remove them
        tb.docker.docker_cmd("volume", "rm", "--force", *volumes, timeout=60)


def down(tb: Testbed, *, timeout: float) -> None:
    found = tb.containers()
    cancel_all_jobs(tb, (c for c in found if c.role == "controller"), min(CANCEL_WAIT, timeout))
    if tb.state.compose_file.is_file():
        tb.docker.compose(tb.project, str(tb.state.compose_file), "down", "--volumes",
                          "--remove-orphans", "--timeout", "5", timeout=timeout, check=False)
    _remove_leftovers(tb, tb.containers())
    if tb.state.path.exists():
        shutil.rmtree(tb.state.path)
