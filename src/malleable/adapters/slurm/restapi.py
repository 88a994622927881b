"""Pure pieces of the REST transport (tested against recorded responses in tests/data/):
slurmrestd's API versions, JWTs, the translation of sbatch options into a job description,
and the parsing of accounting answers. No I/O here; :mod:`malleable.adapters.slurm.rest`
does the requests.

Version families (docs/slurm.md, "Slurm over REST"):

* ``v0.0.36``-``v0.0.39`` (Slurm 22.05, 23.02): job descriptions with plain values
  (``"nodes": "2"``, ``"environment": {NAME: VALUE}``, ``"time_limit": 10``), no
  ``job/allocate``: an expansion cannot be done through REST.
* ``v0.0.40`` and later (Slurm 23.11 to 26.05): the data_parser layout
  (``"environment": ["NAME=VALUE"]``, numbers as ``{"set", "number"}``,
  ``minimum_nodes``), with ``job/allocate``.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from malleable.adapters.slurm.parse import ParseError, SlurmJob

_VERSION_PATH = re.compile(r"^/slurm/v(\d+)\.(\d+)\.(\d+)/")
#: The oldest and newest API versions this transport speaks.
OLDEST = (0, 0, 38)
NEWEST = (0, 0, 45)
#: The first version of the data_parser layout and of ``job/allocate``.
DATA_PARSER = (0, 0, 40)
#: Where the job description of a PATH comes from: what a job's script finds on the nodes.
DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin"


def version_text(version: tuple[int, int, int]) -> str:
    return "v" + ".".join(str(p) for p in version)


def api_versions(spec: Mapping[str, Any]) -> list[tuple[int, int, int]]:
    """The ``/slurm/vX.Y.Z/`` versions an OpenAPI document (``GET /openapi/v3``) lists."""
    paths = spec.get("paths")
    if not isinstance(paths, Mapping):
        raise ParseError("openapi: no 'paths' object")
    found = set()
    for path in paths:
        match = _VERSION_PATH.match(str(path))
        if match:
            found.add((int(match[1]), int(match[2]), int(match[3])))
    return sorted(found)


def choose_version(offered: Iterable[tuple[int, int, int]]) -> tuple[int, int, int]:
    """The newest offered version this transport speaks; ParseError if there is none."""
    usable = [v for v in offered if OLDEST <= v <= NEWEST]
    if not usable:
        shown = ", ".join(version_text(v) for v in sorted(offered)) or "none"
        raise ParseError(f"slurmrestd offers no API version this transport speaks "
                         f"({version_text(OLDEST)} to {version_text(NEWEST)}; offered: {shown})")
    return max(usable)


def can_allocate(version: tuple[int, int, int]) -> bool:
    """Whether the API has ``POST job/allocate`` (helper allocations of an expansion)."""
    return version >= DATA_PARSER


@dataclass(frozen=True, slots=True)
class Claims:
    """What the transport reads from a JWT (never checked here: slurmctld checks it)."""

    user: str
    expires: float | None


def jwt_claims(token: str) -> Claims:
    """The Slurm user (``sun``) and expiry (``exp``) of a token; ParseError if malformed."""
    parts = token.split(".")
    if len(parts) != 3:
        raise ParseError("not a JWT (three dot-separated parts expected)")
    body = parts[1] + "=" * (-len(parts[1]) % 4)
    try:
        claims = json.loads(base64.urlsafe_b64decode(body.encode("ascii")))
    except (binascii.Error, UnicodeError, ValueError):
        raise ParseError("not a JWT (its claims are not base64 JSON)") from None
    if not isinstance(claims, dict):
        raise ParseError("not a JWT (its claims are not an object)")
    exp = claims.get("exp")
    expires = float(exp) if isinstance(exp, int | float) and not isinstance(exp, bool) else None
    return Claims(str(claims.get("sun") or ""), expires)


def read_token(text: str) -> str:
    """A token from a file or a command's output: the token alone or ``SLURM_JWT=TOKEN``
    (what ``scontrol token`` prints); ParseError if it holds anything else."""
    token = text.strip().removeprefix("SLURM_JWT=")
    if not token or len(token) > 8192 or not re.fullmatch(r"[A-Za-z0-9_.=-]+", token):
        raise ParseError("expected one JWT (or SLURM_JWT=TOKEN as `scontrol token` prints)")
    return token


# ----------------------------------------------------------------------------- submitting

#: sbatch/salloc options the transport translates (anything else is refused, not ignored).
_VALUED = ("--job-name", "--comment", "--nodes", "--time", "--output", "--error",
           "--partition", "--dependency", "--account", "--qos", "--reservation",
           "--chdir")
_FLAGS = ("--exclusive", "--no-requeue", "--hold")


def job_description(options: Sequence[str], version: tuple[int, int, int], *, user: str,
                    workdir: str, immediate: bool = False) -> dict[str, Any]:
    """A REST job description from sbatch-style ``options`` (``--name=value`` forms and
    the flags of :data:`_FLAGS`); ValueError for any other option."""
    values: dict[str, str] = {}
    flags: set[str] = set()
    for option in options:
        key, eq, value = option.partition("=")
        if key in _FLAGS and not eq:
            flags.add(key)
        elif key in _VALUED and eq:
            values[key] = value
        else:
            raise ValueError(f"option {option!r} has no REST translation")
    new = version >= DATA_PARSER
    job: dict[str, Any] = {
        "current_working_directory": values.get("--chdir", workdir),
        "environment": ([f"PATH={DEFAULT_PATH}", f"USER={user}"] if new
                        else {"PATH": DEFAULT_PATH, "USER": user}),
    }
    names = {"--job-name": "name", "--comment": "comment", "--output": "standard_output",
             "--error": "standard_error", "--partition": "partition",
             "--dependency": "dependency", "--account": "account", "--qos": "qos",
             "--reservation": "reservation"}
    for option, field in names.items():
        if option in values:
            job[field] = values[option]
    if "--nodes" in values:
        low, _, high = values["--nodes"].partition("-")
        if new:
            # no maximum for one count (sbatch's -N N): an update of ``minimum_nodes`` above
            # it (the service placing a held job at a larger size) would be refused (2006)
            job["minimum_nodes"] = int(low)
            if high:
                job["maximum_nodes"] = int(high)
        else:
            job["nodes"] = values["--nodes"]
    if "--time" in values:
        minutes = time_minutes(values["--time"])
        job["time_limit"] = {"set": True, "number": minutes} if new else minutes
    if "--exclusive" in flags:
        if new:
            job["shared"] = ["none"]  # exclusive in the v0.0.40+ layout
        else:
            job["exclusive"] = "exclusive"  # what 22.05's parser takes (not "true")
    if "--no-requeue" in flags:
        job["requeue"] = False
    if "--hold" in flags:
        job["hold"] = True
    if immediate:
        job["immediate"] = True
    return job


def time_minutes(text: str) -> int:
    """Minutes of an sbatch ``--time`` (``M``, ``H:M:S``, ``D-H:M:S``, ``D-H``...)."""
    days = 0
    if "-" in text:
        head, _, text = text.partition("-")
        days = int(head)
        parts = [int(p) for p in text.split(":")]
        hours, minutes, seconds = [*parts, 0, 0, 0][:3]
    else:
        parts = [int(p) for p in text.split(":")]
        if len(parts) == 1:
            return max(1, parts[0])
        if len(parts) == 2:
            hours, minutes, seconds = 0, parts[0], parts[1]
        else:
            hours, minutes, seconds = parts[:3]
    return max(1, days * 1440 + hours * 60 + minutes + (1 if seconds else 0))


def resize_body(nodes: str, version: tuple[int, int, int]) -> dict[str, Any]:
    """The update body that sets a job's node count (``scontrol update NumNodes=N``).

    v0.0.40+: ``{"minimum_nodes": N}``. v0.0.38: ``{"nodes": "N-0"}``: a plain ``"N"``
    sends a maximum too and Slurm 22.05 refuses it (error 2073)."""
    count = int(nodes)
    if version >= DATA_PARSER:
        return {"minimum_nodes": count}
    return {"nodes": f"{count}-0"}


def job_id_of(answer: Mapping[str, Any]) -> int:
    """The job id of a submit or allocate answer; ParseError if none."""
    for key in ("job_id", "jobid"):
        value = answer.get(key)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    result = answer.get("result")
    if isinstance(result, Mapping):
        return job_id_of(result)
    raise ParseError("the answer names no job id")


def errors_of(answer: Mapping[str, Any]) -> str:
    """Slurm's errors in an answer, as one line ("" if none)."""
    errors = answer.get("errors") or []
    texts = []
    for error in errors if isinstance(errors, list) else []:
        if isinstance(error, Mapping):
            text = str(error.get("description") or error.get("error") or "").strip()
            number = (error.get("error_number") or error.get("error_code")
                      or error.get("errno"))
            if text or number:
                texts.append(f"{text} (error {number})" if number else text)
    return "; ".join(texts)


# ----------------------------------------------------------------------------- accounting


def parse_slurmdb_jobs(data: Mapping[str, Any]) -> list[SlurmJob]:
    """Allocations of ``GET /slurmdb/vX/jobs`` (22.05's plain layout and the later one)."""
    jobs = data.get("jobs")
    if not isinstance(jobs, list):
        raise ParseError("slurmdb jobs: no 'jobs' list")
    out: dict[int, SlurmJob] = {}
    for raw in jobs:
        if not isinstance(raw, Mapping):
            continue
        job_id = raw.get("job_id")
        if not isinstance(job_id, int) or isinstance(job_id, bool):
            continue
        state = raw.get("state") or {}
        current = state.get("current", "") if isinstance(state, Mapping) else state
        if isinstance(current, list):
            current = " ".join(str(c) for c in current)
        times = raw.get("time") or {}
        nodes = _count(raw.get("allocation_nodes")) or _tres_nodes(raw.get("tres"))
        node_list = str(raw.get("nodes") or "")
        job = SlurmJob(
            job_id=job_id, name=str(raw.get("name") or ""), state_raw=str(current or ""),
            nodes=nodes, node_list="" if node_list == "None assigned" else node_list,
            user=str(raw.get("user") or ""), partition=str(raw.get("partition") or ""),
            start_time=_epoch(times.get("start")), end_time=_epoch(times.get("end")),
            submit_time=_epoch(times.get("submission")))
        # a resized job has one RESIZING record per earlier size: the current one counts
        if job_id not in out or not job.state_raw.startswith("RESIZING"):
            out[job_id] = job
    return list(out.values())


def slurmdb_fields(data: Mapping[str, Any], job_id: int) -> dict[str, Any]:
    """The account, partition, QoS, reservation and time limit (minutes; None: unset) of one
    job in a ``GET /slurmdb/vX/job/ID`` answer (for reading helpers back)."""
    for raw in data.get("jobs") or []:
        if isinstance(raw, Mapping) and raw.get("job_id") == job_id:
            reservation = raw.get("reservation") or {}
            limit = (raw.get("time") or {}).get("limit")
            return {"account": str(raw.get("account") or ""),
                    "partition": str(raw.get("partition") or ""),
                    "qos": str(raw.get("qos") or ""),
                    "reservation": str(reservation.get("name") or "")
                    if isinstance(reservation, Mapping) else str(reservation),
                    "time_limit": _minutes(limit)}
    raise ParseError(f"slurmdb job: no job {job_id} in the answer")


def _tres_nodes(tres: Any) -> int:
    """The node count of a job's allocated TRES (22.05 reports ``allocation_nodes`` 0)."""
    allocated = tres.get("allocated") if isinstance(tres, Mapping) else None
    for item in allocated if isinstance(allocated, list) else []:
        if isinstance(item, Mapping) and item.get("type") == "node":
            return _count(item.get("count"))
    return 0


def _count(value: Any) -> int:
    if isinstance(value, Mapping):
        value = value.get("number")
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _epoch(value: Any) -> float | None:
    if isinstance(value, Mapping):
        if not value.get("set", True):
            return None
        value = value.get("number")
    return float(value) if isinstance(value, int | float) and value > 0 else None


def _minutes(value: Any) -> int | None:
    if isinstance(value, Mapping):
        if not value.get("set", True) or value.get("infinite"):
            return None
        value = value.get("number")
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def admin_level(data: Mapping[str, Any]) -> str:
    """A user's admin level from ``GET /slurmdb/vX/user/NAME`` (``None`` if not shown)."""
    for user in data.get("users") or []:
        if isinstance(user, Mapping):
            level = user.get("administrator_level") or "None"
            if isinstance(level, list):
                level = level[0] if level else "None"
            return str(level)
    return "None"
