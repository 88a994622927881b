"""Where a testbed keeps its generated files, and the record of what was brought up.

``$MALLEABLE_TESTBED_STATE/NAME`` (default ``$XDG_STATE_HOME/malleable/testbeds/NAME``,
i.e. ``~/.local/state/malleable/testbeds/NAME``)::

    testbed.json        name, project, topology, image, Slurm version (written at bring-up)
    compose.yml         the compose project (JSON)
    clusters.toml       the clusters config (what `malleable testbed config` prints)
    secrets/            munge key, SSH host and user keys, known_hosts, database password
    etc/SITE/slurm.conf, etc/accounting/slurmdbd.conf, etc/SITE/oar-settings (OAR sites)
    logs/               diagnostics dumped when a bring-up fails
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from malleable.errors import InputError
from malleable.kinds import DEFAULT as DEFAULT_KIND
from malleable.testbed.topology import Site, Topology
from malleable.testbed.versions import DEFAULT


def state_root() -> Path:
    env = os.environ.get("MALLEABLE_TESTBED_STATE")
    if env:
        return Path(env)
    xdg = os.environ.get("XDG_STATE_HOME")
    base = Path(xdg) if xdg else Path.home() / ".local" / "state"
    return base / "malleable" / "testbeds"


@dataclass(frozen=True, slots=True)
class StateDir:
    """The files of one testbed."""

    path: Path

    @property
    def secrets(self) -> Path:
        return self.path / "secrets"

    @property
    def etc(self) -> Path:
        return self.path / "etc"

    @property
    def logs(self) -> Path:
        return self.path / "logs"

    @property
    def compose_file(self) -> Path:
        return self.path / "compose.yml"

    @property
    def clusters_file(self) -> Path:
        return self.path / "clusters.toml"

    @property
    def record_file(self) -> Path:
        return self.path / "testbed.json"

    def exists(self) -> bool:
        return self.record_file.is_file()


@dataclass(frozen=True, slots=True)
class Record:
    """What was brought up: enough to find, describe and remove it later."""

    name: str
    project: str
    topology: Topology
    image: str
    slurm: str = DEFAULT
    """The Slurm version (major.minor) the testbed was brought up with."""

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name, "project": self.project, "image": self.image,
            "slurm": self.slurm,
            "topology": {"name": self.topology.name,
                         "sites": [{"name": s.name, "nodes": s.nodes, "containers": s.containers,
                                    "kind": s.kind}
                                   for s in self.topology.sites]},
        }

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> Record:
        topo = doc["topology"]
        sites = tuple(Site(s["name"], int(s["nodes"]), int(s["containers"]),
                           str(s.get("kind", DEFAULT_KIND))) for s in topo["sites"])
        return cls(doc["name"], doc["project"], Topology(topo["name"], sites), doc["image"],
                   str(doc.get("slurm", DEFAULT)))


def write_record(state: StateDir, record: Record) -> None:
    state.path.mkdir(parents=True, exist_ok=True)
    state.record_file.write_text(json.dumps(record.to_json(), indent=2) + "\n", encoding="utf-8")


def read_record(state: StateDir) -> Record:
    """The record of a testbed; InputError when it was never brought up (or is damaged)."""
    name = state.path.name
    try:
        doc = json.loads(state.record_file.read_text(encoding="utf-8"))
        return Record.from_json(doc)
    except FileNotFoundError:
        raise InputError(f"no testbed named {name!r} is up (bring one up with: malleable "
                         f"testbed up --name {name})") from None
    except (ValueError, KeyError, TypeError) as exc:
        raise InputError(f"damaged testbed record ({exc}); remove it with: malleable testbed "
                         f"down --name {name}", source=str(state.record_file)) from exc
