"""Pure parsers of Slurm's machine-readable output (tested against recorded output).

* ``squeue --json`` -> :class:`SlurmJob` list (22.05 writes plain values; later
  releases wrap numbers as ``{"set": .., "number": ..}`` and states as lists: both read);
  the one way a Slurm job is read: the adapter's poll, the MPI runner (:func:`job_argv`,
  :func:`pick_job`, :func:`state_word`) and the testbed's status all parse it here;
* ``sinfo --json`` -> :class:`SlurmNode` list;
* ``scontrol -o show job`` -> one :class:`SlurmJob` per line;
* ``sacct --parsable2`` (with its header) -> :class:`SlurmJob` list;
* ``sbatch --parsable`` and ``salloc`` messages -> job ids;
* ``sinfo --version`` -> the version (:func:`parse_version`, :func:`version_tuple`).

The same parsers read Slurm 22.05, 24.11 and 26.05 (recorded in tests/data/slurm/V/);
where the JSON differs between versions, both shapes are read (docs/slurm.md lists the
differences).

Slurm job states map to :class:`~malleable.model.JobState` through :data:`JOB_STATES`;
anything not in the table is ``UNKNOWN`` (never taken for completed). Whether a job holds
nodes is :func:`holds_nodes` (:data:`HOLDING_STATES`), the one answer the adapter and
CooRM's real views share.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from malleable.model import JobState

#: Slurm base job state -> the manager's state. Unlisted states map to UNKNOWN.
JOB_STATES: Mapping[str, JobState] = {
    "PENDING": JobState.PENDING,
    "REQUEUED": JobState.PENDING,
    "REQUEUE_HOLD": JobState.PENDING,
    "REQUEUE_FED": JobState.PENDING,
    "RESV_DEL_HOLD": JobState.PENDING,
    "CONFIGURING": JobState.RUNNING,
    "RUNNING": JobState.RUNNING,
    "RESIZING": JobState.RUNNING,
    "COMPLETING": JobState.RUNNING,
    "STAGE_OUT": JobState.RUNNING,
    "SIGNALING": JobState.RUNNING,
    "SUSPENDED": JobState.RUNNING,
    "STOPPED": JobState.RUNNING,
    "COMPLETED": JobState.COMPLETED,
    "FAILED": JobState.FAILED,
    "BOOT_FAIL": JobState.FAILED,
    "NODE_FAIL": JobState.FAILED,
    "OUT_OF_MEMORY": JobState.FAILED,
    "DEADLINE": JobState.TIMEOUT,
    "TIMEOUT": JobState.TIMEOUT,
    "CANCELLED": JobState.CANCELLED,
    "PREEMPTED": JobState.CANCELLED,
    "REVOKED": JobState.CANCELLED,
    "SPECIAL_EXIT": JobState.FAILED,
}

#: Slurm base job states in which a job holds its nodes: it is starting on them
#: (CONFIGURING), runs on them, is suspended on them, or its epilog still runs there
#: (COMPLETING). RESIZING, STOPPED, SIGNALING and STAGE_OUT map to RUNNING above but are
#: not listed (neither of the two former copies of this predicate listed them).
HOLDING_STATES = frozenset({"CONFIGURING", "RUNNING", "SUSPENDED", "COMPLETING"})

#: Node base states (sinfo) in which a node is in service.
_IN_SERVICE = frozenset({"IDLE", "ALLOCATED", "MIXED", "COMPLETING"})
#: Node flags that take a node out of the idle pool even when its base state is IDLE.
_NOT_FREE_FLAGS = frozenset({"DRAIN", "DRAINING", "DRAINED", "COMPLETING", "NOT_RESPONDING",
                             "RESERVED", "MAINTENANCE", "POWERED_DOWN", "POWERING_DOWN",
                             "POWERING_UP", "POWER_DOWN", "REBOOT_REQUESTED", "REBOOT_ISSUED",
                             "FAIL", "PLANNED", "INVALID_REG", "DYNAMIC_FUTURE", "FUTURE"})
#: Node flags of a node that is gone (not merely drained: a drained node still runs its jobs).
_DEAD_FLAGS = frozenset({"NOT_RESPONDING", "FAIL"})
_OUT_OF_SERVICE_FLAGS = frozenset({"DRAIN", "DRAINED", "NOT_RESPONDING", "FAIL", "FUTURE",
                                   "POWERED_DOWN", "MAINTENANCE", "INVALID_REG"})


class ParseError(ValueError):
    """Output that does not have the expected shape."""


def base_state(raw: str) -> str:
    """The base of a Slurm job state, upper case (``CANCELLED by 0`` -> ``CANCELLED``)."""
    return raw.strip().split()[0].upper() if raw.strip() else ""


def map_state(raw: str) -> JobState:
    """The manager's state for a Slurm job state (``RUNNING``, ``CANCELLED by 0``...)."""
    return JOB_STATES.get(base_state(raw), JobState.UNKNOWN)


def holds_nodes(job: SlurmJob) -> bool:
    """Whether ``job`` holds nodes now: a state of :data:`HOLDING_STATES` and nodes > 0."""
    return job.nodes > 0 and base_state(job.state_raw) in HOLDING_STATES


@dataclass(frozen=True, slots=True)
class SlurmJob:
    """The fields of a Slurm job the adapter uses. Times are epoch seconds (None: unset)."""

    job_id: int
    name: str
    state_raw: str
    nodes: int
    node_list: str = ""
    comment: str = ""
    user: str = ""
    partition: str = ""
    reason: str = ""
    submit_time: float | None = None
    start_time: float | None = None
    end_time: float | None = None
    batch_host: str = ""
    """The node that runs the batch script (it dies with that node; "" when unknown)."""
    account: str = ""
    qos: str = ""
    reservation: str = ""
    time_limit: int | None = None
    """Minutes (None: unlimited or not shown)."""
    time_left: float | None = None
    """Seconds the job has left before its time limit, when the output says it without a
    clock (``scontrol``: TimeLimit - RunTime); None otherwise (see :func:`time_left`)."""
    stdout: str = ""
    """The batch script's standard output file ("" when unknown)."""

    @property
    def state(self) -> JobState:
        return map_state(self.state_raw)

    @property
    def completing(self) -> bool:
        """Ended, its epilog still running on its nodes (they are not free yet)."""
        return base_state(self.state_raw) == "COMPLETING"


@dataclass(frozen=True, slots=True)
class SlurmNode:
    """A node as sinfo reports it: base state (upper case) and its flags."""

    name: str
    state: str
    flags: frozenset[str] = frozenset()
    partitions: tuple[str, ...] = ()

    @property
    def in_service(self) -> bool:
        return self.state in _IN_SERVICE and not (self.flags & _OUT_OF_SERVICE_FLAGS)

    @property
    def idle(self) -> bool:
        return self.state == "IDLE" and not (self.flags & _NOT_FREE_FLAGS)

    @property
    def dead(self) -> bool:
        """Down or not answering: a job on it loses it (Slurm ends the job NODE_FAIL
        once the node has been silent for ``SlurmdTimeout``)."""
        return self.state == "DOWN" or bool(self.flags & _DEAD_FLAGS)


# ----------------------------------------------------------------------------- JSON


def _load(text: str, what: str) -> dict[str, Any]:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ParseError(f"{what}: not JSON ({exc})") from None
    if not isinstance(data, dict):
        raise ParseError(f"{what}: expected a JSON object")
    errors = data.get("errors") or []
    if errors:
        raise ParseError(f"{what}: Slurm reported errors: {errors}")
    return data


def _number(value: Any) -> float | None:
    """A plain number, or the ``{"set", "infinite", "number"}`` form of later releases."""
    if isinstance(value, dict):
        if not value.get("set", True) or value.get("infinite", False):
            return None
        value = value.get("number")
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value)


def _time(value: Any) -> float | None:
    t = _number(value)
    return t if t is not None and t > 0 else None


def _state_text(value: Any) -> str:
    if isinstance(value, list):
        return " ".join(str(v) for v in value)
    return str(value or "")


def _text(value: Any) -> str:
    return "" if value is None else str(value)


def parse_squeue_json(text: str) -> list[SlurmJob]:
    """Jobs of ``squeue --json``."""
    return squeue_jobs(_load(text, "squeue --json"), "squeue --json")


def squeue_jobs(data: Mapping[str, Any], what: str = "squeue --json") -> list[SlurmJob]:
    """Jobs of an already decoded ``squeue --json`` document (or slurmrestd's ``GET jobs``)."""
    jobs = data.get("jobs")
    if not isinstance(jobs, list):
        raise ParseError(f"{what}: no 'jobs' list")
    return [_json_job(j) for j in jobs]


def _json_job(raw: Mapping[str, Any]) -> SlurmJob:
    job_id = _number(raw.get("job_id"))
    if job_id is None:
        raise ParseError(f"squeue --json: a job without job_id: {sorted(raw)[:8]}")
    nodes = _number(raw.get("node_count"))
    return SlurmJob(
        job_id=int(job_id), name=_text(raw.get("name")),
        state_raw=_state_text(raw.get("job_state")), nodes=int(nodes or 0),
        node_list=_text(raw.get("nodes")), comment=_text(raw.get("comment")),
        user=_text(raw.get("user_name")), partition=_text(raw.get("partition")),
        reason=_text(raw.get("state_reason")), submit_time=_time(raw.get("submit_time")),
        start_time=_time(raw.get("start_time")), end_time=_time(raw.get("end_time")),
        batch_host=_text(raw.get("batch_host")), account=_text(raw.get("account")),
        qos=_text(raw.get("qos")), reservation=_text(raw.get("resv_name")),
        time_limit=_limit(raw.get("time_limit")), stdout=_text(raw.get("standard_output")))


def _limit(value: Any) -> int | None:
    minutes = _number(value)
    return None if minutes is None or minutes <= 0 else int(minutes)


def time_left(job: SlurmJob, now: float) -> float | None:
    """Seconds ``job`` has left before its time limit at epoch ``now`` (None: unlimited or
    unknown): what scontrol said, else its start plus its limit."""
    if job.time_left is not None:
        return job.time_left
    if job.time_limit is None or job.start_time is None:
        return None
    return job.start_time + job.time_limit * 60.0 - now


#: The state flags Slurm names instead of a job's base state, in the order its
#: ``job_state_string`` tests them (``scontrol``'s ``JobState=`` and 22.05's JSON print that
#: one word; later releases' JSON lists the base state and then every flag).
_SHOWN_FLAGS = ("COMPLETING", "STAGE_OUT", "CONFIGURING", "RESIZING", "REQUEUED",
                "REQUEUE_FED", "REQUEUE_HOLD", "SPECIAL_EXIT", "STOPPED", "REVOKED",
                "RESV_DEL_HOLD", "SIGNALING")


def state_word(raw: str) -> str:
    """The one word Slurm shows for a job state (``RUNNING COMPLETING`` -> ``COMPLETING``,
    as ``scontrol`` prints it); "" for an empty state."""
    words = raw.upper().split()
    return next((flag for flag in _SHOWN_FLAGS if flag in words[1:]), words[0] if words else "")


def job_argv(job_id: int) -> list[str]:
    """The argv that reads one job: ``squeue --json`` of every state (a job that has just
    ended included, as long as slurmctld keeps it). 22.05 ignores ``--states`` and ``--jobs``
    with ``--json`` and lists every job (checked on the testbed): :func:`pick_job` picks."""
    return ["squeue", "--json", "--states=all", f"--jobs={job_id}"]


def pick_job(text: str, job_id: int) -> SlurmJob | None:
    """Job ``job_id`` from the output of :func:`job_argv`; None when Slurm no longer has it
    (not listed, or "Invalid job id" among the JSON's errors). ParseError otherwise."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ParseError(f"squeue --json: not JSON ({exc})") from None
    if not isinstance(data, dict):
        raise ParseError("squeue --json: expected a JSON object")
    errors = data.get("errors") or []
    if errors and "invalid job id" in json.dumps(errors).lower():
        return None
    if errors:
        raise ParseError(f"squeue --json: Slurm reported errors: {errors}")
    return next((j for j in squeue_jobs(data) if j.job_id == job_id), None)


def run_seconds(job: SlurmJob, now: float) -> float | None:
    """Seconds ``job`` has run by epoch ``now`` (to its end if it ended); None before it
    started."""
    if job.start_time is None:
        return None
    end = job.end_time if job.end_time is not None and job.end_time <= now else now
    return max(0.0, end - job.start_time)


def parse_sinfo_json(text: str) -> list[SlurmNode]:
    """Nodes of ``sinfo --json`` (one entry per node; duplicates merged by name)."""
    return sinfo_nodes(_load(text, "sinfo --json"), "sinfo --json")


def sinfo_nodes(data: Mapping[str, Any], what: str = "sinfo --json") -> list[SlurmNode]:
    """Nodes of an already decoded ``sinfo --json`` document (or slurmrestd's ``GET nodes``)."""
    raw_nodes = data.get("nodes")
    if raw_nodes is None and isinstance(data.get("sinfo"), list):  # 23.11+ layout
        raw_nodes = [entry for item in data["sinfo"] for entry in _sinfo_entries(item)]
    if not isinstance(raw_nodes, list):
        raise ParseError(f"{what}: no 'nodes' list")
    nodes: dict[str, SlurmNode] = {}
    for raw in raw_nodes:
        node = _json_node(raw)
        nodes.setdefault(node.name, node)
    return list(nodes.values())


def _sinfo_entries(item: Mapping[str, Any]) -> Iterable[dict[str, Any]]:
    names = item.get("nodes", {}).get("nodes", [])
    state = item.get("node", {}).get("state", [])
    partition = item.get("partition", {}).get("name", "")
    for name in names:
        yield {"name": name, "state": state, "partitions": [partition]}


def _json_node(raw: Mapping[str, Any]) -> SlurmNode:
    name = _text(raw.get("name") or raw.get("hostname"))
    if not name:
        raise ParseError("sinfo --json: a node without a name")
    state = raw.get("state")
    words = [str(s).upper() for s in state] if isinstance(state, list) else [
        w.upper() for w in re.split(r"[+\s]+", _text(state)) if w]
    flags = {str(f).upper() for f in raw.get("state_flags") or []}
    base = words[0] if words else "UNKNOWN"
    flags.update(words[1:])
    if base in _NOT_FREE_FLAGS | {"DRAINED", "DRAINING"}:  # some layouts list flags first
        flags.add(base)
        base = next((w for w in words if w in _IN_SERVICE | {"DOWN"}), "UNKNOWN")
    partitions = tuple(str(p) for p in raw.get("partitions") or [])
    return SlurmNode(name, base, frozenset(flags), partitions)


# ----------------------------------------------------------------------------- text


_PAIR = re.compile(r"(?:^|\s)([A-Za-z][A-Za-z0-9_:/]*)=")


def parse_scontrol_pairs(line: str) -> dict[str, str]:
    """``Key=value`` pairs of one ``scontrol -o`` line (values may hold '=' and spaces)."""
    pairs: dict[str, str] = {}
    matches = list(_PAIR.finditer(line))
    for i, match in enumerate(matches):
        end = matches[i + 1].start() if i + 1 < len(matches) else len(line)
        pairs.setdefault(match.group(1), line[match.end():end].strip())
    return pairs


def parse_scontrol_jobs(text: str) -> list[SlurmJob]:
    """Jobs of ``scontrol -o show job [ID]`` (one line each)."""
    jobs = []
    for line in text.splitlines():
        if not line.strip():
            continue
        pairs = parse_scontrol_pairs(line)
        if "JobId" not in pairs:
            raise ParseError(f"scontrol show job: no JobId in {line[:80]!r}")
        jobs.append(_scontrol_job(pairs))
    return jobs


def _scontrol_job(p: Mapping[str, str]) -> SlurmJob:
    user = p.get("UserId", "").split("(")[0]
    nodes = p.get("NumNodes", "0").split("-")[0]
    node_list = p.get("NodeList", "")
    return SlurmJob(
        job_id=_int(p["JobId"], "JobId"), name=p.get("JobName", ""),
        state_raw=p.get("JobState", ""), nodes=_int(nodes, "NumNodes") if nodes else 0,
        node_list="" if node_list == "(null)" else node_list,
        comment=_null(p.get("Comment", "")), user=user, partition=p.get("Partition", ""),
        reason=p.get("Reason", ""), batch_host=_null(p.get("BatchHost", "")),
        account=_null(p.get("Account", "")), qos=_null(p.get("QOS", "")),
        reservation=_null(p.get("Reservation", "")),
        time_limit=_duration_minutes(p.get("TimeLimit", "")),
        time_left=_left(p.get("TimeLimit", ""), p.get("RunTime", "")),
        stdout=_null(p.get("StdOut", "")))


_DURATION = re.compile(r"^(?:(\d+)-)?(?:(\d+):)?(\d+):(\d+)$")


def duration_seconds(text: str) -> int | None:
    """Seconds of a Slurm duration (``[D-]HH:MM:SS``, ``MM:SS``); None for UNLIMITED and
    anything else."""
    match = _DURATION.match(text.strip())
    if match is None:
        return None
    days, hours, minutes, seconds = (int(g) if g else 0 for g in match.groups())
    return ((days * 24 + hours) * 60 + minutes) * 60 + seconds


def _duration_minutes(text: str) -> int | None:
    seconds = duration_seconds(text)
    return None if seconds is None else seconds // 60


def _left(limit: str, run: str) -> float | None:
    total, used = duration_seconds(limit), duration_seconds(run)
    return None if total is None or used is None else float(total - used)


def _null(value: str) -> str:
    return "" if value == "(null)" else value


def _int(text: str, what: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise ParseError(f"{what} is not an integer: {text!r}") from None


def parse_sacct(text: str) -> list[SlurmJob]:
    """Allocations of ``sacct -X --parsable2 -o JobID,JobName,State,NNodes,Start,End``
    run with ``SLURM_TIME_FORMAT=%s`` (the header line is read, not assumed).

    A resized job has one ``RESIZING`` row per earlier size besides its current
    row; the current (non-``RESIZING``) row is the one returned for each job id.
    """
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        return []
    header = lines[0].split("|")
    jobs: dict[int, SlurmJob] = {}
    for line in lines[1:]:
        row = dict(zip(header, line.split("|"), strict=False))
        job_id = row.get("JobID", "")
        if not job_id.isdigit():
            continue  # steps (12.batch) and array/het forms are not allocations
        job = SlurmJob(
            job_id=int(job_id), name=row.get("JobName", ""), state_raw=row.get("State", ""),
            nodes=int(row["NNodes"]) if row.get("NNodes", "").isdigit() else 0,
            start_time=_epoch(row.get("Start", "")), end_time=_epoch(row.get("End", "")))
        earlier = jobs.get(job.job_id)
        if earlier is None or not job.state_raw.startswith("RESIZING"):
            jobs[job.job_id] = job
    return list(jobs.values())


def _epoch(text: str) -> float | None:
    return float(text) if text.isdigit() and int(text) > 0 else None


_VERSION = re.compile(r"^slurm(?:-wlm)?\s+(\d+)\.(\d+)(?:\.(\d+))?", re.MULTILINE)


def parse_version(text: str) -> str:
    """The version ``sinfo --version`` prints (``slurm 24.11.5`` -> ``24.11.5``)."""
    match = _VERSION.search(text.strip())
    if match is None:
        raise ParseError(f"not a Slurm version: {text.strip()[:60]!r}")
    return ".".join(g for g in match.groups() if g is not None)


def version_tuple(version: str) -> tuple[int, ...]:
    """``24.11.5`` -> ``(24, 11, 5)``, for comparisons."""
    try:
        return tuple(int(part) for part in version.split("."))
    except ValueError:
        raise ParseError(f"not a Slurm version: {version!r}") from None


_GRANTED = re.compile(r"Granted job allocation (\d+)")
_PENDING = re.compile(r"Pending job allocation (\d+)")


def parse_sbatch(text: str) -> int:
    """The job id printed by ``sbatch --parsable`` (``ID`` or ``ID;cluster``)."""
    first = text.strip().splitlines()[0] if text.strip() else ""
    return _int(first.split(";")[0].strip(), "sbatch job id")


def parse_salloc(text: str) -> tuple[int | None, bool]:
    """From salloc's messages: the job id it got (None if none) and whether it was granted."""
    granted = _GRANTED.search(text)
    if granted:
        return int(granted.group(1)), True
    pending = _PENDING.search(text)
    return (int(pending.group(1)) if pending else None), False
