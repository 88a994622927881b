"""Pure parsers of OAR 2.5's machine-readable output (``oarstat -J``, ``oarnodes -J``,
``oarsub -J``), tested against output recorded on the testbed (tests/data/oar/).

OAR's job states map to the manager's through :data:`STATES`; anything else is
``UNKNOWN``, never taken for completed. A job that ended in ``Error`` timed out when
its events hold a ``WALLTIME`` event (such a job also carries ``FRAG_JOB_REQUEST``),
was cancelled when its first event, ``RESUME_JOB`` aside (a job submitted ``--hold`` and
resumed), is a ``FRAG_JOB_REQUEST`` (``oardel``: an ``oardel`` of a job OAR had already
put in Error, e.g. for ``OUTPUT_FILES``, leaves it failed), failed otherwise; a
``Terminated`` job completed when its exit code is 0 and failed otherwise.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from malleable.model import JobState


class ParseError(ValueError):
    """OAR printed something this parser cannot read."""


#: OAR's job states (oarstat's ``state``) -> the manager's.
STATES: Mapping[str, JobState] = MappingProxyType({
    "Waiting": JobState.PENDING,
    "Hold": JobState.PENDING,
    "toLaunch": JobState.PENDING,
    "toAckReservation": JobState.PENDING,
    "Launching": JobState.PENDING,
    "Running": JobState.RUNNING,
    "Suspended": JobState.RUNNING,
    "Resuming": JobState.RUNNING,
    "Finishing": JobState.RUNNING,
    "toError": JobState.FAILED,
    "Terminated": JobState.COMPLETED,
    "Error": JobState.FAILED,
})
#: States in which a job holds its nodes (its processes may still run).
HOLDING = frozenset({"Launching", "Running", "Suspended", "Resuming", "Finishing"})
#: The event ``oardel`` leaves on a job it kills.
CANCEL_EVENT = "FRAG_JOB_REQUEST"
#: Events that say nothing of how a job ended: ``oarresume`` of a held job (recorded:
#: ``RESUME_JOB``, then ``FRAG_JOB_REQUEST`` when it was deleted while running).
REQUEST_EVENTS = frozenset({"RESUME_JOB"})
#: Events of a job killed at its walltime.
WALLTIME_EVENTS = frozenset({"WALLTIME", "WALLTIME_REACHED"})
#: Node states (oarnodes' ``state``) in which a node can run jobs.
USABLE_NODE_STATES = frozenset({"Alive"})


@dataclass(frozen=True, slots=True)
class OarJob:
    """One job as oarstat shows it (times in epoch seconds, None when OAR has none)."""

    job_id: int
    name: str
    owner: str
    state_raw: str
    nodes: tuple[str, ...]
    submitted: float | None
    start_time: float | None
    stop_time: float | None
    exit_code: int | None = None
    events: tuple[str, ...] = ()
    types: tuple[str, ...] = ()
    walltime: float | None = None
    notes: tuple[str, ...] = ()
    """The events as ``TYPE: description`` (what an ``Error`` job says went wrong)."""
    resources: int | None = None
    """The resources it asked (``R=`` of oarstat's ``message``; one per node on the
    testbed): the size a held job starts at. None when the message has none."""

    @property
    def state(self) -> JobState:
        """The manager's state (see the module docstring for Error and Terminated)."""
        state = STATES.get(self.state_raw, JobState.UNKNOWN)
        if self.state_raw == "Error":
            # A job killed at its walltime also carries FRAG_JOB_REQUEST: test it first.
            if WALLTIME_EVENTS & set(self.events):
                return JobState.TIMEOUT
            first = next((e for e in self.events if e not in REQUEST_EVENTS), None)
            if first == CANCEL_EVENT:
                return JobState.CANCELLED
        elif self.state_raw == "Terminated" and self.exit_code not in (None, 0):
            return JobState.FAILED
        return state

    @property
    def holds_nodes(self) -> bool:
        return self.state_raw in HOLDING and bool(self.nodes)


@dataclass(frozen=True, slots=True)
class OarNode:
    """One OAR resource (the testbed has one per node)."""

    resource_id: int
    address: str
    state: str

    @property
    def usable(self) -> bool:
        return self.state in USABLE_NODE_STATES


def _load(text: str, what: str) -> Any:
    if not text.strip():
        return {}
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise ParseError(f"{what}: not JSON ({exc.msg} at line {exc.lineno})") from None


def _time(value: Any) -> float | None:
    """OAR writes 0 (or null) for a time that has not come."""
    if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
        return float(value)
    return None


#: The wall time in oarstat's ``message`` (``R=2,W=0:5:0,J=B (Karma=...)``): H:M:S.
_MESSAGE_WALLTIME = re.compile(r"(?:^|,)W=(\d+):(\d+):(\d+)(?:,|\s|$)")


def _walltime(doc: dict[str, Any]) -> float | None:
    """Seconds: ``walltime`` (``oarstat -fJ``) or, in the short listing (``oarstat -J``,
    which has no such field), the ``W=H:M:S`` of the job's ``message``; None if neither."""
    value = doc.get("walltime")
    if isinstance(value, int | float) and not isinstance(value, bool) and value > 0:
        return float(value)
    match = _MESSAGE_WALLTIME.search(str(doc.get("message") or ""))
    if match is None:
        return None
    hours, minutes, seconds = (int(g) for g in match.groups())
    return float(hours * 3600 + minutes * 60 + seconds) or None


#: The resource count in oarstat's ``message`` (``R=2,W=...``).
_MESSAGE_RESOURCES = re.compile(r"(?:^|,)R=(\d+)(?:,|\s|$)")


def _resources(doc: dict[str, Any]) -> int | None:
    match = _MESSAGE_RESOURCES.search(str(doc.get("message") or ""))
    return int(match.group(1)) or None if match else None


def _events(doc: Any) -> list[dict[str, Any]]:
    """The job's events in the order OAR recorded them (``event_id``)."""
    found = [e for e in doc.get("events") or () if isinstance(e, dict)]
    return sorted(found, key=_event_id)


def _event_id(event: dict[str, Any]) -> int:
    value = event.get("event_id")
    return value if isinstance(value, int) else 0


def _job(key: str, doc: Any) -> OarJob:
    if not isinstance(doc, dict):
        raise ParseError(f"oarstat: job {key} is not an object")
    try:
        job_id = int(str(doc.get("Job_Id", doc.get("job_id", key))))
    except (TypeError, ValueError):
        raise ParseError(f"oarstat: job {key} has no numeric id") from None
    exit_code = doc.get("exit_code")
    return OarJob(
        job_id=job_id,
        name=str(doc.get("name") or ""),
        owner=str(doc.get("owner") or ""),
        state_raw=str(doc.get("state") or ""),
        nodes=tuple(str(n) for n in doc.get("assigned_network_address") or ()),
        submitted=_time(doc.get("submissionTime")),
        start_time=_time(doc.get("startTime")),
        stop_time=_time(doc.get("stopTime")),
        exit_code=exit_code if isinstance(exit_code, int) else None,
        events=tuple(str(e.get("type", "")) for e in _events(doc)),
        types=tuple(str(t) for t in doc.get("types") or ()),
        walltime=_walltime(doc),
        notes=tuple(f"{e.get('type', '')}: {e.get('description', '')}" for e in _events(doc)),
        resources=_resources(doc),
    )


def parse_oarstat(text: str) -> list[OarJob]:
    """Jobs from ``oarstat -J`` or ``oarstat -fJ [-j ID ...]`` (an object keyed by job id)."""
    doc = _load(text, "oarstat")
    if not isinstance(doc, dict):
        raise ParseError("oarstat: expected an object keyed by job id")
    return sorted((_job(k, v) for k, v in doc.items()), key=lambda j: j.job_id)


def parse_oarnodes(text: str) -> list[OarNode]:
    """Resources from ``oarnodes -J`` (an object keyed by resource id)."""
    doc = _load(text, "oarnodes")
    if not isinstance(doc, dict):
        raise ParseError("oarnodes: expected an object keyed by resource id")
    out = []
    for key, res in doc.items():
        if not isinstance(res, dict) or not res.get("network_address"):
            raise ParseError(f"oarnodes: resource {key} has no network_address")
        try:
            resource_id = int(str(res.get("resource_id", key)))
        except ValueError:
            raise ParseError(f"oarnodes: resource {key} has no numeric id") from None
        out.append(OarNode(resource_id, str(res["network_address"]),
                           str(res.get("state", ""))))
    return sorted(out, key=lambda n: n.resource_id)


def parse_oarsub(text: str) -> int:
    """The job id from ``oarsub -J`` (its JSON object sits between admission-rule chatter
    and ``#####`` lines); ParseError when OAR refused the job (it prints id -5 and more)."""
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end < start:
        raise ParseError(f"oarsub: no JSON in its output: {_last_line(text)!r}")
    try:
        doc = json.loads(text[start:end + 1])
        job_id = int(doc["job_id"])
    except (json.JSONDecodeError, KeyError, TypeError, ValueError):
        raise ParseError(f"oarsub: cannot read the job id: {_last_line(text)!r}") from None
    if job_id <= 0:
        raise ParseError(f"oarsub refused the job: {_last_line(text)}")
    return job_id


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    errors = [line for line in lines if "error" in line.lower() or "not enough" in line.lower()]
    return "; ".join(errors) if errors else (lines or [""])[-1]
