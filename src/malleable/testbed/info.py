"""What a running testbed looks like, as data, and the pure parsers that produce it.

``docker inspect`` JSON becomes :class:`Container` records; ``sinfo --json``/``squeue
--json`` output, read by the adapter's own parsers (:mod:`malleable.adapters.slurm.parse`),
becomes per-site counts; :class:`SiteEndpoint` is how a client reaches a site (the
clusters config that ``malleable testbed config`` prints is made of them).
"""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from malleable.testbed.compose import LABEL_ROLE, LABEL_SITE, REST_PORT

if TYPE_CHECKING:
    from malleable.adapters.slurm.parse import SlurmNode

#: The login user of every testbed container.
USER = "malleable"
#: Where the controllers' sshd is published on the host.
PUBLISH_HOST = "127.0.0.1"
#: The nodes, as the adapter reads them (:func:`parse_sinfo`).
SINFO_ARGS = ("sinfo", "--json")
#: The queue, as the adapter reads it (:func:`parse_squeue`).
SQUEUE_ARGS = ("squeue", "--json")
#: The site's Slurm version (``slurm 24.11.5``).
VERSION_ARGS = ("sinfo", "--version")


@dataclass(frozen=True, slots=True)
class Container:
    """One container of a testbed, from ``docker inspect``."""

    id: str
    hostname: str
    role: str
    site: str | None
    state: str
    health: str | None
    address: str | None
    ssh_port: int | None
    aliases: tuple[str, ...] = ()
    rest_port: int | None = None
    """slurmrestd's port published on the host (a Slurm controller; None otherwise)."""

    @property
    def running(self) -> bool:
        return self.state == "running"

    @property
    def healthy(self) -> bool:
        return self.running and self.health in (None, "healthy")


@dataclass(frozen=True, slots=True)
class SiteEndpoint:
    """How to reach one site: SSH to its controller (the login node), and its names (for an
    OAR site ``slurm_cluster`` and ``partition`` are empty)."""

    site: str
    slurm_cluster: str
    controller: str
    host: str
    port: int
    address: str
    user: str
    key: str
    known_hosts: str
    nodes: int
    partition: str
    compute: tuple[str, ...] = ()
    kind: str = "slurm"
    rest_url: str = ""
    """slurmrestd's address on the host (``http://127.0.0.1:PORT``; "" when it has none)."""


@dataclass(frozen=True, slots=True)
class SiteStatus:
    """One site now: its controller, its nodes by state (Slurm's words; an OAR node that is
    Alive is ``idle``), its queue."""

    site: str
    controller: str
    controller_state: str
    controller_health: str | None
    nodes: int
    node_states: dict[str, int]
    jobs: int
    endpoint: SiteEndpoint | None
    error: str = ""
    kind: str = "slurm"
    slurm_version: str = ""
    """The site's Slurm version as its client reports it (``24.11.5``; empty for OAR)."""
    rest: str = ""
    """slurmrestd's health: ``ok (v0.0.40, ...)`` when it answers an authenticated ping, else
    what is wrong ("" for an OAR site)."""

    @property
    def idle(self) -> int:
        return self.node_states.get("idle", 0)


@dataclass(frozen=True, slots=True)
class TestbedStatus:
    """The whole testbed now (``status --json`` prints :meth:`to_json`)."""

    __test__ = False  # not a pytest class, despite its name

    name: str
    project: str
    topology: str
    up: bool
    sites: dict[str, SiteStatus]
    containers: tuple[Container, ...] = field(default=())

    @property
    def idle(self) -> int:
        return sum(s.idle for s in self.sites.values())

    @property
    def controllers_up(self) -> int:
        return sum(1 for s in self.sites.values() if s.controller_health == "healthy")

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "project": self.project,
            "topology": self.topology,
            "up": self.up,
            "idle_nodes": self.idle,
            "controllers_up": self.controllers_up,
            "sites": {name: _plain({**asdict(s), "idle": s.idle})
                      for name, s in self.sites.items()},
            "containers": [_plain(asdict(c)) for c in self.containers],
        }


def _plain(value: Any) -> Any:
    """Tuples become lists, recursively (what JSON holds)."""
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def _ssh_port(ports: dict[str, Any] | None, container_port: str = "22/tcp") -> int | None:
    bindings = (ports or {}).get(container_port) or []
    for binding in bindings:
        port = binding.get("HostPort")
        if port:
            return int(port)
    return None


def parse_inspect(text: str) -> list[Container]:
    """Containers from ``docker inspect`` JSON (a list of objects)."""
    out = []
    for doc in json.loads(text):
        labels = doc.get("Config", {}).get("Labels") or {}
        state = doc.get("State", {})
        networks = doc.get("NetworkSettings", {}).get("Networks") or {}
        net: dict[str, Any] = next(iter(networks.values()), {})
        out.append(Container(
            id=doc["Id"],
            hostname=doc.get("Config", {}).get("Hostname", ""),
            role=labels.get(LABEL_ROLE, ""),
            site=labels.get(LABEL_SITE),
            state=state.get("Status", "unknown"),
            health=(state.get("Health") or {}).get("Status"),
            address=net.get("IPAddress") or None,
            ssh_port=_ssh_port(doc.get("NetworkSettings", {}).get("Ports")),
            aliases=tuple(a for a in (net.get("Aliases") or []) if a != doc["Id"][:12]),
            rest_port=_ssh_port(doc.get("NetworkSettings", {}).get("Ports"),
                                f"{REST_PORT}/tcp"),
        ))
    return out


def parse_sinfo(text: str) -> dict[str, str]:
    """Node -> state word from ``sinfo --json`` ({} when the output is not readable)."""
    from malleable.adapters.slurm.parse import ParseError, parse_sinfo_json

    try:
        return {node.name: node_word(node) for node in parse_sinfo_json(text)}
    except ParseError:
        return {}


def node_word(node: SlurmNode) -> str:
    """A node's state as ``sinfo --format=%T`` words it: its base state (``idle``,
    ``allocated``, ``mixed``, ``down``), ``drained``/``draining`` when drained (idle or down:
    drained; still running jobs: draining), ``completing`` while an epilog runs, ``*`` when
    it does not respond."""
    flags = node.flags
    word = node.state.lower()
    if flags & {"DRAIN", "DRAINED", "DRAINING"}:
        word = "drained" if node.state in ("IDLE", "DOWN") else "draining"
    elif "COMPLETING" in flags:
        word = "completing"
    return word + ("*" if "NOT_RESPONDING" in flags else "")


def count_states(states: dict[str, str]) -> dict[str, int]:
    return dict(sorted(Counter(states.values()).items()))


def parse_version(text: str) -> str:
    """The version of ``sinfo --version`` (``slurm 24.11.5`` -> ``24.11.5``; '' if none)."""
    from malleable.adapters.slurm.parse import ParseError
    from malleable.adapters.slurm.parse import parse_version as parse

    try:
        return parse(text)
    except ParseError:
        return ""


def parse_squeue(text: str) -> dict[str, str]:
    """Job id -> state word of the jobs ``squeue --json`` lists that have not ended (what
    plain ``squeue`` shows: 22.05's JSON also lists jobs that have just ended, later
    releases' does not); {} when the output is not readable."""
    from malleable.adapters.slurm.parse import (
        ParseError,
        map_state,
        parse_squeue_json,
        state_word,
    )

    try:
        jobs = parse_squeue_json(text)
    except ParseError:
        return {}
    words = {str(job.job_id): state_word(job.state_raw) for job in jobs}
    return {job_id: word for job_id, word in words.items() if not map_state(word).finished}
