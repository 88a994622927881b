"""``/etc/malleable/manager.toml``: the site service's configuration (docs/site.md).

::

    [service]
    state = "/var/lib/malleable/state.sqlite"   # the durable journal (SQLite)
    poll = 5.0                                  # seconds between cycles
    metrics = "127.0.0.1:9464"                  # Prometheus /metrics; "" turns it off
    status = "/var/lib/malleable/status.json"   # optional; default: beside the state
    account = "malleable"                       # optional: the account it must run as
    max_tries = 0                               # optional: KOALA's placement tries (0: none)
    channel = "0.0.0.0:7461"                    # optional: the --mpi jobs' channel (agents)
    copies_grace = 30.0                         # optional: seconds to wait for a job's copies
    group_readable = false                      # optional: state dir 0750, files 0640

    [policy]                                    # as for `malleable manager run`
    name = "fpsma"
    [policy.options]
    approach = "pra"

    [ssh]                                       # optional defaults for every site
    [clusters.vu]                               # one table per site, as in clusters.toml
    host = "vu-ctl"
    reserve = 2                                 # nodes the service never takes

The ``[ssh]``, ``[policy]`` and ``[clusters.*]`` tables are those of
:mod:`malleable.config` (``malleable testbed config`` prints them). Unknown keys are
refused, naming the valid ones. Loading reads the file and nothing else.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from malleable.config import ClustersConfig, check_files, parse_config, read_toml
from malleable.errors import InputError

TOP_KEYS = ("service", "policy", "ssh", "clusters")
SERVICE_KEYS = ("state", "poll", "metrics", "status", "account", "max_tries", "channel",
                "copies_grace", "group_readable")
#: Default of ``service.copies_grace`` (seconds).
COPIES_GRACE = 30.0


@dataclass(frozen=True, slots=True)
class ServiceConfig:
    """The ``[service]`` table and the sites and policy of the file."""

    clusters: ClustersConfig
    state: Path
    poll: float = 5.0
    metrics: tuple[str, int] | None = None
    status: Path | None = None
    account: str | None = None
    max_tries: int | None = None
    source: str = "<config>"
    channel: tuple[str, int] | None = None
    """Where the ``--mpi`` jobs' agents connect (:mod:`malleable.site.channel`); None: off."""
    copies_grace: float = COPIES_GRACE
    """Seconds after adopting a job whose tag announces more copies than were found (the
    tag's ``copies``) before it is placed where its copies are."""
    group_readable: bool = False
    """The state directory 0750 and the journal and status file 0640 (the service account's
    group may read them); by default 0700 and 0600."""

    @property
    def status_path(self) -> Path:
        """Where ``serve`` writes its status and ``status`` reads it."""
        return self.status or self.state.with_name(self.state.name + ".status.json")


def load_service_config(path: str | Path) -> ServiceConfig:
    """Read and check a service config file (InputError naming the key on any problem)."""
    path = Path(path)
    config = parse_service_config(read_toml(path), str(path), path.resolve().parent)
    check_files(config.clusters)
    return config


def parse_service_config(data: dict[str, Any], source: str = "<config>",
                         base: Path | None = None) -> ServiceConfig:
    """Check a parsed document (see the module docstring)."""
    base = base or Path.cwd()
    _only(data, TOP_KEYS, "", source)
    raw = data.get("service")
    if not isinstance(raw, dict):
        raise InputError("service: missing table (it needs at least state = \"PATH\")",
                         source=source)
    _only(raw, SERVICE_KEYS, "service", source)
    clusters = parse_config({k: v for k, v in data.items() if k != "service"}, source, base)
    if "state" not in raw:
        raise InputError("service.state: missing (the journal's path, e.g. "
                         "\"/var/lib/malleable/state.sqlite\")", source=source)
    tries = _integer(raw, "max_tries", 0, source)
    group = raw.get("group_readable", False)
    if not isinstance(group, bool):
        raise InputError(f"service.group_readable: {group!r} is not true or false",
                         source=source)
    return ServiceConfig(
        clusters=clusters,
        state=_path(raw, "state", base, source),
        poll=_seconds(raw.get("poll", 5.0), source, "poll", 0.05, 3600),
        metrics=_address(raw.get("metrics", ""), source),
        channel=_address(raw.get("channel", ""), source, "channel"),
        copies_grace=_seconds(raw.get("copies_grace", COPIES_GRACE), source, "copies_grace",
                              0, 3600),
        status=_path(raw, "status", base, source) if "status" in raw else None,
        account=_text(raw, "account", source) if "account" in raw else None,
        max_tries=tries or None,
        source=source,
        group_readable=group,
    )


def _only(table: dict[str, Any], valid: tuple[str, ...], path: str, source: str) -> None:
    for key in table:
        if key not in valid:
            name = f"{path}.{key}" if path else key
            raise InputError(f"{name}: unknown key; valid keys: {', '.join(valid)}",
                             source=source)


def _text(raw: dict[str, Any], key: str, source: str) -> str:
    value = raw[key]
    if not isinstance(value, str) or not value:
        raise InputError(f"service.{key}: must be a non-empty string", source=source)
    return value


def _path(raw: dict[str, Any], key: str, base: Path, source: str) -> Path:
    value = Path(_text(raw, key, source)).expanduser()
    return value if value.is_absolute() else base / value


def _integer(raw: dict[str, Any], key: str, default: int, source: str) -> int:
    value = raw.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise InputError(f"service.{key}: must be an integer >= 0, not {value!r}",
                         source=source)
    return value


def _seconds(value: Any, source: str, key: str, low: float, high: float) -> float:
    """``service.KEY``, a number of seconds in ``[low, high]``."""
    if (isinstance(value, bool) or not isinstance(value, int | float)
            or not math.isfinite(value) or not low <= value <= high):
        raise InputError(f"service.{key}: must be a number of seconds in [{low:g}, {high:g}], "
                         f"not {value!r}", source=source)
    return float(value)


def _address(value: Any, source: str, key: str = "metrics") -> tuple[str, int] | None:
    """``HOST:PORT`` (``""``: none)."""
    if value == "":
        return None
    if isinstance(value, str) and ":" in value:
        host, _, port = value.rpartition(":")
        if port.isdigit() and 0 <= int(port) <= 65535:
            return host.strip("[]") or "127.0.0.1", int(port)
    raise InputError(f"service.{key}: must be \"HOST:PORT\" (or \"\" for none), not "
                     f"{value!r}", source=source)
