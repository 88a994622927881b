"""The CooRM launcher <-> RMS protocol (section III-B) as typed messages and JSON.

Every message is a frozen dataclass; :func:`encode` turns one into one line of
compact UTF-8 JSON (``{"v": 1, "type": ..., fields...}`` ending with ``\\n``) and
:func:`decode` does the reverse, validating every field. The schema is documented
in ``docs/coorm.md``; :data:`VERSION` changes only with an incompatible change.

Launcher -> RMS: :class:`Subscribe`, :class:`ListClustersInfo`,
:class:`ListInterClusterInfo`, :class:`Request`, :class:`Done`.
RMS -> launcher: :class:`Subscribed`, :class:`ChangeNotify`, :class:`ClustersInfo`,
:class:`InterClusterInfo`, :class:`StartNotify`, :class:`KillNotify`, :class:`Error`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar

from malleable.coorm.profile import Cap, Steps
from malleable.workloads.filters import Filter as Filter  # re-exported: the protocol sends it

VERSION = 1

#: ``Change.type`` values (the paper's "type" of a CHANGE).
AVAILABILITY = "availability"
CLUSTER_INFO = "clusterInfo"
INTER_CLUSTER_INFO = "interClusterInfo"
CHANGE_TYPES = (AVAILABILITY, CLUSTER_INFO, INTER_CLUSTER_INFO)


class ProtocolError(ValueError):
    """A message that does not follow the schema (named field, what was expected)."""


# ------------------------------------------------------------------------- data types


@dataclass(frozen=True, slots=True)
class ClusterInfo:
    """CINFO: a cluster's static properties."""

    cid: str
    hosts: int
    speed: float = 1.0
    cores_per_host: int = 1
    ram_per_host_mb: int = 0
    scratch_gb: float = 0.0
    san_latency: float = 5e-5
    """Latency between two hosts of this cluster, seconds."""


@dataclass(frozen=True, slots=True)
class Link:
    """One entry of ICINFO: the network between two clusters."""

    a: str
    b: str
    latency: float
    bandwidth: float = 1.25e8
    """Bytes per second."""


@dataclass(frozen=True, slots=True)
class Change:
    """CHANGE: ``{cid, type, cap}``; ``cap`` only for an availability change."""

    cid: str
    type: str
    cap: Steps | None = None

    def __post_init__(self) -> None:
        if self.cap is not None and not isinstance(self.cap, Cap):
            object.__setattr__(self, "cap", Cap.of(self.cap))


# ------------------------------------------------------------------------- messages


@dataclass(frozen=True, slots=True)
class Message:
    """Base of every protocol message."""

    TYPE: ClassVar[str] = ""


@dataclass(frozen=True, slots=True)
class Subscribe(Message):
    TYPE: ClassVar[str] = "subscribe"
    filter: Filter = field(default_factory=Filter)
    name: str = ""
    """A label for logs; the RMS assigns the application id."""


@dataclass(frozen=True, slots=True)
class ListClustersInfo(Message):
    TYPE: ClassVar[str] = "listClustersInfo"


@dataclass(frozen=True, slots=True)
class ListInterClusterInfo(Message):
    TYPE: ClassVar[str] = "listInterClusterInfo"


@dataclass(frozen=True, slots=True)
class Request(Message):
    """REQUEST: hosts per cluster and the duration of the allocation (seconds)."""

    TYPE: ClassVar[str] = "request"
    hosts: Mapping[str, int] = field(default_factory=dict)
    duration: float = 0.0

    def key(self) -> tuple[tuple[tuple[str, int], ...], float]:
        return tuple(sorted((c, n) for c, n in self.hosts.items() if n > 0)), self.duration


@dataclass(frozen=True, slots=True)
class Done(Message):
    TYPE: ClassVar[str] = "done"


@dataclass(frozen=True, slots=True)
class Subscribed(Message):
    TYPE: ClassVar[str] = "subscribed"
    app: str = ""


@dataclass(frozen=True, slots=True)
class ChangeNotify(Message):
    TYPE: ClassVar[str] = "changeNotify"
    changes: tuple[Change, ...] = ()


@dataclass(frozen=True, slots=True)
class ClustersInfo(Message):
    TYPE: ClassVar[str] = "clustersInfo"
    clusters: tuple[ClusterInfo, ...] = ()


@dataclass(frozen=True, slots=True)
class InterClusterInfo(Message):
    TYPE: ClassVar[str] = "interClusterInfo"
    links: tuple[Link, ...] = ()


@dataclass(frozen=True, slots=True)
class StartNotify(Message):
    """The hosts (RIDs) the application may use now, per cluster.

    ``jobs`` is set only by a service over real sites (``coorm/real.py``): the id of
    the Slurm or OAR job holding the application's nodes, per cluster (= site). It is left
    out of the encoding when empty, so simulated traffic is unchanged.
    """

    TYPE: ClassVar[str] = "startNotify"
    rids: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    jobs: Mapping[str, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class KillNotify(Message):
    TYPE: ClassVar[str] = "killNotify"
    reason: str = ""


@dataclass(frozen=True, slots=True)
class Error(Message):
    TYPE: ClassVar[str] = "error"
    message: str = ""


# ------------------------------------------------------------------------- encoding


def to_dict(msg: Message) -> dict[str, Any]:
    """The JSON object of a message (see docs/coorm.md for the schema)."""
    body: dict[str, Any] = {"v": VERSION, "type": msg.TYPE}
    if isinstance(msg, Subscribe):
        body["filter"] = _filter_dict(msg.filter)
        body["name"] = msg.name
    elif isinstance(msg, Request):
        body["hosts"] = {c: n for c, n in sorted(msg.hosts.items()) if n > 0}
        body["duration"] = _finite(msg.duration, "duration")
    elif isinstance(msg, Subscribed):
        body["app"] = msg.app
    elif isinstance(msg, ChangeNotify):
        body["changes"] = [_change_dict(ch) for ch in msg.changes]
    elif isinstance(msg, ClustersInfo):
        body["clusters"] = [_info_dict(i) for i in msg.clusters]
    elif isinstance(msg, InterClusterInfo):
        body["links"] = [{"a": lk.a, "b": lk.b, "latency": lk.latency,
                          "bandwidth": lk.bandwidth} for lk in msg.links]
    elif isinstance(msg, StartNotify):
        body["rids"] = {c: list(r) for c, r in sorted(msg.rids.items())}
        if msg.jobs:
            body["jobs"] = dict(sorted(msg.jobs.items()))
    elif isinstance(msg, KillNotify):
        body["reason"] = msg.reason
    elif isinstance(msg, Error):
        body["message"] = msg.message
    return body


def encode(msg: Message) -> bytes:
    """One message as one line of compact JSON (UTF-8, ending in ``\\n``)."""
    text = json.dumps(to_dict(msg), separators=(",", ":"), allow_nan=False)
    return (text + "\n").encode()


def decode(line: bytes | str) -> Message:
    """Parse one line; ProtocolError naming the problem when it breaks the schema."""
    try:
        body = json.loads(line)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ProtocolError(f"not JSON: {exc}") from None
    if not isinstance(body, dict):
        raise ProtocolError("a message must be a JSON object")
    return from_dict(body)


def from_dict(body: Mapping[str, Any]) -> Message:
    if body.get("v") != VERSION:
        raise ProtocolError(f"unsupported protocol version {body.get('v')!r} (expected {VERSION})")
    kind = body.get("type")
    parser = _PARSERS.get(kind) if isinstance(kind, str) else None
    if parser is None:
        raise ProtocolError(f"unknown message type {kind!r} (known: {', '.join(sorted(_PARSERS))})")
    try:
        return parser(body)
    except (KeyError, TypeError, ValueError) as exc:
        raise ProtocolError(f"bad {kind} message: {exc}") from None


def _finite(x: float, what: str) -> float:
    if not math.isfinite(x):
        raise ValueError(f"{what} {x} is not finite")
    return x


def _filter_dict(f: Filter) -> dict[str, Any]:
    out: dict[str, Any] = {"min_hosts": f.min_hosts, "min_speed": f.min_speed,
                           "min_cores_per_host": f.min_cores_per_host,
                           "min_ram_per_host_mb": f.min_ram_per_host_mb}
    if f.clusters is not None:
        out["clusters"] = list(f.clusters)
    return out


def _info_dict(i: ClusterInfo) -> dict[str, Any]:
    return {"cid": i.cid, "hosts": i.hosts, "speed": i.speed, "cores_per_host": i.cores_per_host,
            "ram_per_host_mb": i.ram_per_host_mb, "scratch_gb": i.scratch_gb,
            "san_latency": i.san_latency}


def _change_dict(ch: Change) -> dict[str, Any]:
    out: dict[str, Any] = {"cid": ch.cid, "type": ch.type}
    if ch.cap is not None:
        out["cap"] = list(zip(ch.cap.times, ch.cap.hosts, strict=True))  # inf/nan refused
    return out


def _int(v: Any, what: str, low: int = 0) -> int:
    if isinstance(v, bool) or not isinstance(v, int) or v < low:
        raise ValueError(f"{what} must be an integer >= {low}, not {v!r}")
    return v


def _num(v: Any, what: str, low: float = 0.0) -> float:
    if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) or v < low:
        raise ValueError(f"{what} must be a finite number >= {low}, not {v!r}")
    return float(v)


def _str(v: Any, what: str) -> str:
    if not isinstance(v, str):
        raise ValueError(f"{what} must be a string, not {v!r}")
    return v


def _parse_filter(d: Any) -> Filter:
    if not isinstance(d, dict):
        raise ValueError("filter must be an object")
    clusters = d.get("clusters")
    return Filter(
        min_hosts=_int(d.get("min_hosts", 1), "filter.min_hosts"),
        min_speed=_num(d.get("min_speed", 0.0), "filter.min_speed"),
        min_cores_per_host=_int(d.get("min_cores_per_host", 1), "filter.min_cores_per_host"),
        min_ram_per_host_mb=_int(d.get("min_ram_per_host_mb", 0), "filter.min_ram_per_host_mb"),
        clusters=None if clusters is None else tuple(_str(c, "filter.clusters[]")
                                                     for c in clusters),
    )


def _parse_request(b: Mapping[str, Any]) -> Request:
    hosts = b["hosts"]
    if not isinstance(hosts, dict):
        raise ValueError("hosts must be an object mapping cluster id to host count")
    parsed = {_str(c, "hosts key"): _int(n, f"hosts[{c}]") for c, n in hosts.items()}
    duration = _num(b["duration"], "duration")
    if duration <= 0:
        raise ValueError("duration must be positive")
    return Request(hosts=parsed, duration=duration)


def _parse_change(d: Any) -> Change:
    if not isinstance(d, dict):
        raise ValueError("a change must be an object")
    kind = _str(d["type"], "change.type")
    if kind not in CHANGE_TYPES:
        raise ValueError(f"change.type {kind!r} is not one of {', '.join(CHANGE_TYPES)}")
    cap = d.get("cap")
    steps: Steps | None = None
    if cap is not None:
        steps = Cap.of((_num(t, "cap time", -math.inf), _int(n, "cap hosts")) for t, n in cap)
    if kind == AVAILABILITY and not steps:
        raise ValueError("an availability change needs a non-empty cap")
    return Change(cid=_str(d["cid"], "change.cid"), type=kind, cap=steps)


def _parse_info(d: Any) -> ClusterInfo:
    return ClusterInfo(
        cid=_str(d["cid"], "cid"), hosts=_int(d["hosts"], "hosts"),
        speed=_num(d.get("speed", 1.0), "speed"),
        cores_per_host=_int(d.get("cores_per_host", 1), "cores_per_host", 1),
        ram_per_host_mb=_int(d.get("ram_per_host_mb", 0), "ram_per_host_mb"),
        scratch_gb=_num(d.get("scratch_gb", 0.0), "scratch_gb"),
        san_latency=_num(d.get("san_latency", 5e-5), "san_latency"),
    )


def _parse_link(d: Any) -> Link:
    return Link(a=_str(d["a"], "link.a"), b=_str(d["b"], "link.b"),
                latency=_num(d["latency"], "link.latency"),
                bandwidth=_num(d.get("bandwidth", 1.25e8), "link.bandwidth"))


def _parse_rids(d: Any) -> dict[str, tuple[str, ...]]:
    if not isinstance(d, dict):
        raise ValueError("rids must be an object mapping cluster id to host ids")
    return {_str(c, "rids key"): tuple(_str(r, "rid") for r in rs) for c, rs in d.items()}


def _parse_jobs(d: Any) -> dict[str, int]:
    if not isinstance(d, dict):
        raise ValueError("jobs must be an object mapping cluster id to a job id")
    return {_str(c, "jobs key"): _int(j, "job id") for c, j in d.items()}


_PARSERS: dict[str, Callable[[Mapping[str, Any]], Message]] = {
    "subscribe": lambda b: Subscribe(filter=_parse_filter(b.get("filter", {})),
                                     name=_str(b.get("name", ""), "name")),
    "listClustersInfo": lambda b: ListClustersInfo(),
    "listInterClusterInfo": lambda b: ListInterClusterInfo(),
    "request": _parse_request,
    "done": lambda b: Done(),
    "subscribed": lambda b: Subscribed(app=_str(b["app"], "app")),
    "changeNotify": lambda b: ChangeNotify(changes=tuple(_parse_change(c) for c in b["changes"])),
    "clustersInfo": lambda b: ClustersInfo(clusters=tuple(_parse_info(c) for c in b["clusters"])),
    "interClusterInfo": lambda b: InterClusterInfo(links=tuple(_parse_link(x)
                                                               for x in b["links"])),
    "startNotify": lambda b: StartNotify(rids=_parse_rids(b["rids"]),
                                         jobs=_parse_jobs(b.get("jobs", {}))),
    "killNotify": lambda b: KillNotify(reason=_str(b.get("reason", ""), "reason")),
    "error": lambda b: Error(message=_str(b.get("message", ""), "message")),
}


# ------------------------------------------------------------------------- sizes

#: Fields whose JSON object is a map (keys travel on the wire in a CDR encoding too).
_MAP_FIELDS = frozenset({"hosts", "rids", "jobs"})
_CDR_HEADER = 12  # GIOP message header


def cdr_size(msg: Message) -> int:
    """Bytes of a CORBA-CDR-like binary encoding of ``msg`` (the paper's measure).

    A 12-byte header, 4 bytes per integer or enumeration, 8 per double, strings
    as a 4-byte length + bytes + NUL padded to 4, sequences as a 4-byte count +
    items; struct field names are not sent (map keys are).
    """
    if isinstance(msg, ChangeNotify):  # the bulk of the traffic: counted directly
        # type tag, change count; per change: cid, type enum, step count, and per step
        # a double and a long aligned to 8 bytes
        return _CDR_HEADER + 4 + 4 + sum(
            _cdr(False, ch.cid) + 4 + 4 + (16 * len(ch.cap) if ch.cap is not None else 0)
            for ch in msg.changes)
    body = to_dict(msg)
    body.pop("v")
    return _CDR_HEADER + 4 + sum(_cdr(k in _MAP_FIELDS, v) for k, v in body.items() if k != "type")


def _cdr(is_map: bool, value: Any) -> int:
    if isinstance(value, bool | int):
        return 4
    if isinstance(value, float):
        return 8
    if isinstance(value, str):
        return 4 + ((len(value.encode()) + 1 + 3) // 4) * 4
    if isinstance(value, list | tuple):
        return 4 + sum(_cdr(False, v) for v in value)
    if isinstance(value, dict):
        keys = sum(_cdr(False, k) for k in value) if is_map else 0
        return (4 if is_map else 0) + keys + sum(_cdr(k in _MAP_FIELDS, v)
                                                 for k, v in value.items())
    return 0
