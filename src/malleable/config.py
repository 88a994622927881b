"""The clusters config: which sites the manager and ``malleable resize`` drive, and how
to reach them (TOML, the format ``malleable testbed config`` prints).

::

    [ssh]                       # optional defaults for every site
    user = "root"
    key = "/path/id_ed25519"
    known_hosts = "/path/known_hosts"

    [policy]                    # optional: the policy (a --policy option overrides it)
    name = "acds"               # any name of `malleable policies list`
    [policy.options]            # optional: the policy's options (see docs/policies.md)
    quantum = 60.0

    [clusters.vu]
    kind = "slurm"              # the adapter: "slurm" or "oar" (docs/oar.md)
    host = "127.0.0.1"          # without host, commands run on this machine
    port = 40022
    partition = "batch"         # optional
    nodes = 85                  # optional, informative (sinfo is read anyway)
    reserve = 0                 # optional: nodes left to local users
    speed = 1.0                 # optional: relative node speed
    finish_file = "/home/malleable/finish"  # optional, for tests: ends managed jobs' work
    slurm_cluster = "vu"        # optional, informative: Slurm's ClusterName
    controller = "vu-ctl"       # optional, informative: the host name inside the testbed
    address = "172.19.0.7"      # optional, informative: the sshd on the testbed network

    [clusters.lisa]             # a Slurm site reached through slurmrestd, without SSH
    transport = "rest"          # "ssh" (default; or local commands without host) or "rest"
    url = "https://lisa-ctl.example.org:6820"
    token_file = "/etc/malleable/lisa.jwt"   # or token_command = ["argv", ...] printing it
    rest_user = "malleable"     # optional: the token's user (default: its `sun` claim)
    tls_ca = "/etc/malleable/lisa-ca.pem"    # optional: the CA bundle of an https URL
    workdir = "/tmp"            # optional: submitted jobs' working directory

Parsed with :mod:`tomllib` into frozen dataclasses. Unknown keys, wrong types and
missing values raise :class:`~malleable.errors.InputError` naming the file, the key
path and the valid keys. Relative paths are taken from the file's directory.
Loading reads the file (UTF-8, a leading byte-order mark allowed) and checks that each
site's ``key`` and ``known_hosts`` files exist: it never connects anywhere.
:func:`parse_config` checks a parsed document without touching the file system.
"""

from __future__ import annotations

import math
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

from malleable import kinds
from malleable.errors import InputError, read_text
from malleable.policies.registry import PolicySpec

_SSH_KEYS = ("host", "port", "user", "key", "known_hosts", "connect_timeout", "host_key_alias")
_INFO_KEYS = ("slurm_cluster", "controller", "address")
_REST_KEYS = ("url", "token_file", "token_command", "rest_user", "tls_ca", "workdir")
_SITE_KEYS = ("kind", *_SSH_KEYS, "nodes", "partition", "reserve", "speed", "command_timeout",
              "finish_file", *_INFO_KEYS, "transport", *_REST_KEYS)
_TRANSPORTS = ("ssh", "rest")
_TOP_KEYS = ("clusters", "ssh", "policy")


@dataclass(frozen=True, slots=True)
class SSHTarget:
    """Where and as whom to connect; paths to the private key and the known_hosts file."""

    host: str
    port: int
    user: str
    key: Path
    known_hosts: Path
    connect_timeout: float = 10.0
    host_key_alias: str | None = None
    """Look the host key up under this name instead of ``[host]:port`` (as OpenSSH's
    ``HostKeyAlias``): the pin survives a published port that changes on restart."""

    @property
    def label(self) -> str:
        return f"{self.user}@{self.host}:{self.port}"


@dataclass(frozen=True, slots=True)
class RestTarget:
    """A Slurm site reached through slurmrestd (``transport = "rest"``): its URL and where the
    JWT comes from (a file, read again when it changes, or a command printing it)."""

    url: str
    token_file: Path | None = None
    token_command: tuple[str, ...] | None = None
    user: str | None = None
    """The Slurm user of the token (None: the token's own ``sun`` claim)."""
    verify: bool | str = True
    """TLS: verify against the system's CAs (True) or this CA bundle's path."""
    workdir: str = "/tmp"
    """The working directory of the jobs submitted over REST (on the nodes)."""


@dataclass(frozen=True, slots=True)
class SiteConfig:
    """One site: its name, how to reach it (None: locally) and its scheduling knobs."""

    name: str
    ssh: SSHTarget | None = None
    kind: str = kinds.DEFAULT
    nodes: int | None = None
    partition: str | None = None
    reserve: int = 0
    speed: float = 1.0
    command_timeout: float = 30.0
    slurm_cluster: str | None = None
    controller: str | None = None
    address: str | None = None
    finish_file: str | None = None
    """For tests: a path on the site's nodes that ends a managed job's sleep payload once it
    exists (:class:`~malleable.adapters.slurm.payload.Payload`)."""
    rest: RestTarget | None = None
    """slurmrestd instead of SSH (``transport = "rest"``; Slurm sites only)."""


@dataclass(frozen=True, slots=True)
class ClustersConfig:
    """Every configured site, in file order."""

    sites: tuple[SiteConfig, ...]
    source: str = "<config>"
    policy: PolicySpec | None = None

    def site(self, name: str) -> SiteConfig:
        """The site called ``name``; InputError with the valid names otherwise."""
        for site in self.sites:
            if site.name == name:
                return site
        valid = ", ".join(s.name for s in self.sites)
        raise InputError(f"no site {name!r} in the config; valid: {valid}", source=self.source)


def read_toml(path: Path) -> dict[str, Any]:
    """A config file's TOML table (InputError naming the file if it is not UTF-8 TOML)."""
    text = read_text(path, "config")
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise InputError(f"not valid TOML: {exc}", source=str(path)) from None


def load_config(path: str | Path) -> ClustersConfig:
    """Read and check a clusters config file."""
    path = Path(path)
    config = parse_config(read_toml(path), str(path), path.resolve().parent)
    check_files(config)
    return config


def check_files(config: ClustersConfig) -> None:
    """InputError, at load rather than at the first connection, for a site whose SSH
    ``key`` or ``known_hosts`` is not an existing file."""
    for site in config.sites:
        token = site.rest.token_file if site.rest is not None else None
        if token is not None and not token.is_file():
            raise InputError(f"clusters.{site.name}.token_file: {token}: no such file",
                             source=config.source)
        if site.ssh is None:
            continue
        for key, file in (("key", site.ssh.key), ("known_hosts", site.ssh.known_hosts)):
            if not file.is_file():
                raise InputError(f"clusters.{site.name}.{key}: {file}: no such file (the "
                                 "path may come from the [ssh] table)", source=config.source)


def parse_config(data: Mapping[str, Any], source: str = "<config>",
                 base: Path | None = None) -> ClustersConfig:
    """Check an already-parsed TOML document (see the module docstring)."""
    where = _Where(source, base or Path.cwd())
    where.only(data, _TOP_KEYS, "")
    defaults = where.table(data.get("ssh", {}), "ssh")
    where.only(defaults, _SSH_KEYS, "ssh")
    sites = where.table(data.get("clusters"), "clusters")
    if not sites:
        raise InputError("no clusters: add a [clusters.NAME] table per site", source=source)
    policy = where.policy(data["policy"]) if "policy" in data else None
    return ClustersConfig(tuple(where.site(name, where.table(raw, f"clusters.{name}"),
                                           defaults) for name, raw in sites.items()), source,
                          policy)


@dataclass(frozen=True, slots=True)
class _Where:
    source: str
    base: Path

    def fail(self, path: str, message: str) -> InputError:
        return InputError(f"{path}: {message}" if path else message, source=self.source)

    def only(self, table: Mapping[str, Any], valid: tuple[str, ...], path: str) -> None:
        for key in table:
            if key not in valid:
                name = f"{path}.{key}" if path else key
                raise self.fail(name, f"unknown key; valid keys: {', '.join(valid)}")

    def table(self, value: Any, path: str) -> dict[str, Any]:
        if value is None:
            raise self.fail(path, "missing table")
        if not isinstance(value, dict):
            raise self.fail(path, f"must be a table, not {type(value).__name__}")
        return value

    def policy(self, value: Any) -> PolicySpec:
        """``[policy]``: ``name`` and, in ``[policy.options]``, the policy's options (checked
        when the policy is built, against the policy's own list)."""
        raw = self.table(value, "policy")
        self.only(raw, ("name", "options"), "policy")
        if "name" not in raw:
            raise self.fail("policy.name", "missing (e.g. name = \"fpsma\"; see `malleable "
                                           "policies list`)")
        options = self.table(raw.get("options", {}), "policy.options")
        return PolicySpec(self.text(raw, "name", "policy"), MappingProxyType(dict(options)))

    def site(self, name: str, raw: dict[str, Any], defaults: dict[str, Any]) -> SiteConfig:
        path = f"clusters.{name}"
        self.only(raw, _SITE_KEYS, path)
        nodes = raw.get("nodes")
        kind = self.text(raw, "kind", path) if "kind" in raw else kinds.DEFAULT
        if kind not in kinds.BUILTIN and kind not in kinds.names():  # plug-ins: looked up
            raise self.fail(f"{path}.kind",
                            f"unknown kind {kind!r}; valid: {', '.join(kinds.names())}")
        info = {key: self.text(raw, key, path) for key in _INFO_KEYS if key in raw}
        transport = self.text(raw, "transport", path) if "transport" in raw else "ssh"
        if transport not in _TRANSPORTS:
            raise self.fail(f"{path}.transport", f"unknown transport {transport!r}; valid: "
                                                 f"{', '.join(_TRANSPORTS)}")
        rest = self.rest(raw, path, kind) if transport == "rest" else None
        if rest is None:
            extra = [k for k in _REST_KEYS if k in raw]
            if extra:
                raise self.fail(f"{path}.{extra[0]}", 'only for transport = "rest"')
        return SiteConfig(
            name=name,
            ssh=None if rest is not None else self.ssh(raw, defaults, path),
            rest=rest,
            kind=kind,
            nodes=None if nodes is None else self.integer(raw, "nodes", path, 1),
            partition=self.text(raw, "partition", path) if "partition" in raw else None,
            reserve=self.integer(raw, "reserve", path, 0, default=0),
            speed=self.number(raw, "speed", path, default=1.0),
            command_timeout=self.number(raw, "command_timeout", path, default=30.0),
            finish_file=self.finish_file(raw, path),
            **info,
        )

    def rest(self, raw: dict[str, Any], path: str, kind: str) -> RestTarget:
        if not kinds.has_transport(kind, "rest"):
            able = " and ".join(kinds.label(k) for k in kinds.names()
                                if kinds.has_transport(k, "rest"))
            raise self.fail(f"{path}.transport", f'transport = "rest" is for {able} sites only')
        ssh = [k for k in _SSH_KEYS if k in raw]
        if ssh:
            raise self.fail(f"{path}.{ssh[0]}", 'not for transport = "rest" (no SSH is used)')
        if "url" not in raw:
            raise self.fail(f"{path}.url", "missing: slurmrestd's URL, e.g. "
                                           '"https://slurm.example.org:6820"')
        url = self.text(raw, "url", path)
        if not url.startswith(("http://", "https://")) or any(c.isspace() for c in url):
            raise self.fail(f"{path}.url", f"{url!r} is not an http:// or https:// URL")
        if ("token_file" in raw) == ("token_command" in raw):
            raise self.fail(f"{path}.token_file", "give exactly one of token_file and "
                                                  "token_command")
        command = None
        if "token_command" in raw:
            value = raw["token_command"]
            if (not isinstance(value, list) or not value
                    or not all(isinstance(v, str) and v for v in value)):
                raise self.fail(f"{path}.token_command", "must be a non-empty list of strings "
                                                         "(an argv, never run by a shell)")
            command = tuple(value)
        workdir = self.text(raw, "workdir", path) if "workdir" in raw else "/tmp"
        if not workdir.startswith("/"):
            raise self.fail(f"{path}.workdir", f"{workdir!r} is not an absolute path")
        return RestTarget(
            url=url,
            token_file=self.path(raw, "token_file", path) if "token_file" in raw else None,
            token_command=command,
            user=self.text(raw, "rest_user", path) if "rest_user" in raw else None,
            verify=str(self.path(raw, "tls_ca", path)) if "tls_ca" in raw else True,
            workdir=workdir)

    def finish_file(self, raw: dict[str, Any], path: str) -> str | None:
        if "finish_file" not in raw:
            return None
        value = self.text(raw, "finish_file", path)
        if not value.startswith("/"):
            raise self.fail(f"{path}.finish_file", f"{value!r} is not an absolute path (a path "
                                                   "on the site's nodes, e.g. in /home)")
        return value

    def ssh(self, raw: dict[str, Any], defaults: dict[str, Any],
            path: str) -> SSHTarget | None:
        if "host" not in raw and "host" not in defaults:
            return None
        merged = {**defaults, **{k: v for k, v in raw.items() if k in _SSH_KEYS}}
        for key in ("user", "key", "known_hosts"):
            if key not in merged:
                raise self.fail(f"{path}.{key}", "missing (needed to reach the site over SSH; "
                                                 "it may also come from the [ssh] table)")
        return SSHTarget(
            host=self.text(merged, "host", path),
            port=self.integer(merged, "port", path, 1, default=22, high=65535),
            user=self.text(merged, "user", path),
            key=self.path(merged, "key", path),
            known_hosts=self.path(merged, "known_hosts", path),
            connect_timeout=self.number(merged, "connect_timeout", path, default=10.0),
            host_key_alias=(self.text(merged, "host_key_alias", path)
                            if "host_key_alias" in merged else None),
        )

    def text(self, table: dict[str, Any], key: str, path: str) -> str:
        value = table[key]
        if not isinstance(value, str) or not value:
            raise self.fail(f"{path}.{key}", "must be a non-empty string")
        return value

    def path(self, table: dict[str, Any], key: str, path: str) -> Path:
        value = Path(self.text(table, key, path)).expanduser()
        return value if value.is_absolute() else self.base / value

    def integer(self, table: dict[str, Any], key: str, path: str, low: int,
                default: int | None = None, high: int | None = None) -> int:
        value = table.get(key, default)
        if (isinstance(value, bool) or not isinstance(value, int) or value < low
                or (high is not None and value > high)):
            wanted = f"in [{low}, {high}]" if high is not None else f">= {low}"
            raise self.fail(f"{path}.{key}", f"must be an integer {wanted}, not {value!r}")
        return value

    def number(self, table: dict[str, Any], key: str, path: str, default: float) -> float:
        value = table.get(key, default)
        if (isinstance(value, bool) or not isinstance(value, int | float)
                or not math.isfinite(value) or value <= 0):
            raise self.fail(f"{path}.{key}", f"must be a positive number, not {value!r}")
        return float(value)
