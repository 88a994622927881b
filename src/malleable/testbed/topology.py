"""Testbed topologies: which Slurm and OAR sites to emulate, with how many nodes and containers.

A Slurm site is a controller container (``slurmctld`` and ``sshd``, the site's login
node) and ``containers`` compute containers that share the site's ``nodes`` emulated
nodes (one ``slurmd -N NODE`` each). An OAR site (``kind = "oar"``) is a server
container (PostgreSQL, OAR's server and user tools, ``sshd``: the login node) and
compute containers whose emulated nodes are network aliases (OAR reaches a node by ssh
to its name on port 6667). Built-in topologies are ``das3`` (the five DAS-3 clusters),
``das3-mixed`` (the same sizes: three Slurm and two OAR sites) and ``small`` (two
sites of four nodes, for tests); a TOML file describes any other layout::

    # my-topology.toml
    [sites.alpha]
    nodes = 16
    containers = 2      # optional, default 2
    kind = "oar"        # optional, default "slurm"

    [sites.beta]
    nodes = 8

Names of the containers and nodes derive from the site name: ``alpha-ctl``,
``alpha-c0``, ``alpha-c1``; nodes ``alpha-n001`` ... ``alpha-n016``.
"""

from __future__ import annotations

import math
import re
import tomllib
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from malleable.errors import InputError
from malleable.kinds import DEFAULT, builder, with_use

#: Site names become Slurm ClusterNames, hostnames and database table prefixes.
SITE_NAME = re.compile(r"^[a-z][a-z0-9]{0,15}$")
#: Most emulated nodes a site may have (ports and memory stay reasonable below this).
MAX_NODES = 1000
#: Most compute containers a site may have.
MAX_CONTAINERS = 32
#: Keys a ``[sites.NAME]`` table may hold.
SITE_KEYS = ("nodes", "containers", "kind")
#: Keys the top level of a topology file may hold.
TOP_KEYS = ("name", "sites")
DEFAULT_CONTAINERS = 2


@dataclass(frozen=True, slots=True)
class Site:
    """One emulated cluster (Slurm, or OAR with ``kind = "oar"``)."""

    name: str
    nodes: int
    containers: int = DEFAULT_CONTAINERS
    kind: str = DEFAULT

    @property
    def controller(self) -> str:
        """Hostname of the controller (and login) container: SlurmctldHost or OAR server."""
        return f"{self.name}-ctl"

    def node_names(self) -> list[str]:
        """Names of the emulated nodes, ``SITE-n001`` and up."""
        width = max(3, len(str(self.nodes)))
        return [f"{self.name}-n{i:0{width}d}" for i in range(1, self.nodes + 1)]

    def compute_hosts(self) -> list[str]:
        """Hostnames of the compute containers."""
        return [f"{self.name}-c{i}" for i in range(self.containers)]

    def layout(self) -> dict[str, list[str]]:
        """Compute container hostname -> the nodes it runs (spread evenly, in order)."""
        names = self.node_names()
        base, extra = divmod(self.nodes, self.containers)
        out: dict[str, list[str]] = {}
        start = 0
        for i, host in enumerate(self.compute_hosts()):
            count = base + (1 if i < extra else 0)
            out[host] = names[start:start + count]
            start += count
        return out


@dataclass(frozen=True, slots=True)
class Topology:
    """A set of sites brought up together (one shared accounting service)."""

    name: str
    sites: tuple[Site, ...]

    @property
    def total_nodes(self) -> int:
        return sum(s.nodes for s in self.sites)

    @property
    def has_slurm(self) -> bool:
        """Whether a Slurm site needs the shared accounting service."""
        return any(builder(s.kind, "testbed", "the testbed").accounting for s in self.sites)

    @property
    def total_containers(self) -> int:
        """Containers of a testbed: the accounting service (with a Slurm site), and per site
        controller + compute."""
        return int(self.has_slurm) + sum(s.containers + 1 for s in self.sites)

    def site(self, name: str) -> Site:
        for site in self.sites:
            if site.name == name:
                return site
        raise InputError(f"no site {name!r} in topology {self.name!r}; sites: "
                         f"{', '.join(s.name for s in self.sites)}")

    def scaled(self, factor: float) -> Topology:
        """The same sites with ``round(nodes * factor)`` nodes each (at least one)."""
        if not math.isfinite(factor) or factor <= 0 or factor > 1:
            raise InputError(f"--scale must be in (0, 1], got {factor}")
        if factor == 1:
            return self
        sites = []
        for s in self.sites:
            nodes = max(1, round(s.nodes * factor))
            sites.append(replace(s, nodes=nodes, containers=min(s.containers, nodes)))
        return Topology(f"{self.name}*{factor:g}", tuple(sites))


#: The five DAS-3 clusters (as in the KOALA experiments and malleable.model.DAS3).
DAS3 = Topology("das3", (Site("vu", 85), Site("uva", 41), Site("delft", 68),
                         Site("multimedian", 46), Site("leiden", 32)))
#: Two sites of four nodes in two containers each: enough for most integration tests.
#: The DAS-3 sizes with two sites run by OAR: one manager over both kinds.
DAS3_MIXED = Topology("das3-mixed", (Site("vu", 85), Site("uva", 41), Site("delft", 68),
                                     Site("multimedian", 46, kind="oar"),
                                     Site("leiden", 32, kind="oar")))
SMALL = Topology("small", (Site("vu", 4), Site("uva", 4)))
BUILTIN: dict[str, Topology] = {t.name: t for t in (DAS3, DAS3_MIXED, SMALL)}


def load_topology(spec: str) -> Topology:
    """A built-in topology by name, or one read from a TOML file."""
    if spec in BUILTIN:
        return BUILTIN[spec]
    path = Path(spec)
    if not path.is_file():
        raise InputError(f"topology {spec!r} is neither a built-in ({', '.join(BUILTIN)}) nor a "
                         "TOML file")
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise InputError(f"cannot read topology file: {exc.strerror}", source=spec) from exc
    return parse_topology(text, source=spec, default_name=path.stem)


def parse_topology(text: str, *, source: str = "<topology>",
                   default_name: str = "custom") -> Topology:
    """Parse a topology TOML document; every mistake is an :class:`InputError`."""
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"not valid TOML: {exc}", source=source) from exc
    _check_keys(doc, TOP_KEYS, "the top level", source)
    name = doc.get("name", default_name)
    if not isinstance(name, str) or not name:
        raise InputError("'name' must be a non-empty string", source=source)
    sites_doc = doc.get("sites")
    if not isinstance(sites_doc, dict) or not sites_doc:
        raise InputError("no sites: add at least one [sites.NAME] table with 'nodes = N'",
                         source=source)
    sites = tuple(_parse_site(key, value, source) for key, value in sites_doc.items())
    return Topology(name, sites)


def _parse_site(name: str, table: Any, source: str) -> Site:
    where = f"[sites.{name}]"
    if not SITE_NAME.match(name):
        raise InputError(f"{where}: a site name must be lowercase letters and digits, starting "
                         "with a letter, at most 16 characters", source=source)
    if not isinstance(table, dict):
        raise InputError(f"{where} must be a table with 'nodes = N'", source=source)
    _check_keys(table, SITE_KEYS, where, source)
    if "nodes" not in table:
        raise InputError(f"{where}: missing 'nodes = N'", source=source)
    nodes = _positive_int(table["nodes"], f"{where} nodes", MAX_NODES, source)
    containers = _positive_int(table.get("containers", DEFAULT_CONTAINERS),
                               f"{where} containers", MAX_CONTAINERS, source)
    kind = table.get("kind", DEFAULT)
    able = with_use("testbed")  # the registry's kinds with a testbed side
    if kind not in able:
        raise InputError(f"{where}: kind must be one of {', '.join(able)}, got {kind!r}",
                         source=source)
    if containers > nodes:
        raise InputError(f"{where}: {containers} containers for {nodes} nodes; every compute "
                         "container needs at least one node", source=source)
    return Site(name, nodes, containers, kind)


def _check_keys(table: dict[str, Any], valid: tuple[str, ...], where: str, source: str) -> None:
    unknown = sorted(set(table) - set(valid))
    if unknown:
        raise InputError(f"unknown key(s) {', '.join(unknown)} in {where}; valid keys: "
                         f"{', '.join(valid)}", source=source)


def _positive_int(value: Any, what: str, limit: int, source: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= limit:
        raise InputError(f"{what} must be an integer from 1 to {limit}, got {value!r}",
                         source=source)
    return value
