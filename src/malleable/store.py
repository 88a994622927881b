"""The manager's durable state: a SQLite journal, and reconciliation after a restart.

:class:`Store` implements the manager's :class:`~malleable.manager.Journal` (jobs
submitted, operations, job events) and the Slurm adapter's
:class:`~malleable.adapters.slurm.cluster.SiteJournal` (Slurm ids, resizes begun and
ended). Every write is committed at once (autocommit, WAL), so a crash loses at most
the statement in flight.

:func:`resume` rebuilds a :class:`~malleable.manager.Manager` from the journal and
hands each cluster adapter the jobs it had running (``adopt``), so the next cycle
reconciles them with what the cluster reports: jobs that ended meanwhile end with
the cluster's times, resizes that were in flight are closed as ``interrupted`` and
the job's size is whatever the cluster shows.
"""

from __future__ import annotations

import enum
import json
import logging
import sqlite3
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol

from malleable.errors import ExternalError, InputError
from malleable.manager import Manager
from malleable.metrics.records import JobRecord
from malleable.model import JobKind, JobSpec, JobState, Operation, SizeRule
from malleable.resources import Adopting, JobEvent, ResourceManager

logger = logging.getLogger(__name__)

SCHEMA_VERSION = 1

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS workload (seq INTEGER PRIMARY KEY, job_id TEXT UNIQUE NOT NULL,
    spec TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS submitted (seq INTEGER PRIMARY KEY, job_id TEXT UNIQUE NOT NULL,
    spec TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS operations (seq INTEGER PRIMARY KEY, time REAL NOT NULL,
    kind TEXT NOT NULL, job_id TEXT NOT NULL, cluster TEXT NOT NULL, amount INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS events (seq INTEGER PRIMARY KEY, time REAL NOT NULL,
    job_id TEXT NOT NULL, state TEXT NOT NULL, size INTEGER NOT NULL, reason TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS slurm_jobs (site TEXT NOT NULL, job_id TEXT NOT NULL,
    slurm_id INTEGER NOT NULL, PRIMARY KEY (site, job_id));
CREATE TABLE IF NOT EXISTS resizes (id INTEGER PRIMARY KEY, site TEXT NOT NULL,
    job_id TEXT NOT NULL, slurm_id INTEGER NOT NULL, before INTEGER NOT NULL,
    target INTEGER NOT NULL, after INTEGER, outcome TEXT, reason TEXT, seconds REAL,
    helper INTEGER);
"""


class ResizeOutcome(Protocol):
    """What the journal keeps of a finished resize (the Slurm adapter's ResizeResult)."""

    @property
    def after(self) -> int: ...

    @property
    def outcome(self) -> enum.Enum: ...

    @property
    def reason(self) -> str: ...

    @property
    def seconds(self) -> float: ...

    @property
    def helper(self) -> int | None: ...


@dataclass(frozen=True, slots=True)
class RunInfo:
    """What a run needs to be taken up again: its tag, its clock and its policy."""

    run_id: str
    epoch0: float
    time_scale: float
    approach: str
    policy: str
    workload: str
    options: dict[str, Any] = field(default_factory=dict)
    """The policy's options (journals written before options existed have none)."""


# ----------------------------------------------------------------------------- specs


def spec_to_json(spec: JobSpec) -> str:
    body = asdict(spec)
    body["kind"] = spec.kind.value
    body["size_rule"] = spec.size_rule.value
    return json.dumps(body, sort_keys=True)


def spec_from_json(text: str) -> JobSpec:
    body: dict[str, Any] = json.loads(text)
    body["kind"] = JobKind(body["kind"])
    body["size_rule"] = SizeRule(body["size_rule"])
    return JobSpec(**body)


# ----------------------------------------------------------------------------- store


class Store:
    """A SQLite journal of one manager run (see the module docstring)."""

    def __init__(self, connection: sqlite3.Connection, path: str) -> None:
        self._db = connection
        self.path = path

    @classmethod
    def open(cls, path: str | Path) -> Store:
        """Open (creating if needed) the journal at ``path`` (``:memory:`` for tests)."""
        where = str(path)
        try:
            db = sqlite3.connect(where, isolation_level=None, check_same_thread=False)
            if where != ":memory:":
                db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
            db.executescript(_SCHEMA)
        except sqlite3.Error as exc:
            raise InputError(f"cannot open the state database: {exc}", source=where) from None
        store = cls(db, where)
        store._check_version()
        return store

    def _check_version(self) -> None:
        found = self._meta("schema")
        if found is None:
            self._set_meta("schema", str(SCHEMA_VERSION))
        elif found != str(SCHEMA_VERSION):
            raise InputError(f"state database has schema {found}, this malleable writes "
                             f"{SCHEMA_VERSION}: use a new --state file", source=self.path)

    def close(self) -> None:
        self._db.close()

    def _write(self, sql: str, args: Sequence[Any]) -> int:
        try:
            cursor = self._db.execute(sql, tuple(args))
        except sqlite3.Error as exc:
            raise ExternalError(f"state database {self.path}: {exc}") from None
        return int(cursor.lastrowid or 0)

    def _rows(self, sql: str, args: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        return list(self._db.execute(sql, tuple(args)).fetchall())

    def _meta(self, key: str) -> str | None:
        rows = self._rows("SELECT value FROM meta WHERE key = ?", (key,))
        return str(rows[0][0]) if rows else None

    def _set_meta(self, key: str, value: str) -> None:
        self._write("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (key, value))

    # ------------------------------------------------------------ the run

    def run_info(self) -> RunInfo | None:
        """The run this journal holds, or None for a new journal."""
        text = self._meta("run")
        return None if text is None else RunInfo(**json.loads(text))

    def begin_run(self, info: RunInfo, workload: Sequence[JobSpec]) -> None:
        """Record a new run and its whole workload (InputError if one is there already)."""
        if self.run_info() is not None:
            raise InputError("the state database already holds a run: resume it or use a "
                             "new --state file", source=self.path)
        self._db.execute("BEGIN")
        try:
            for spec in workload:
                self._db.execute("INSERT INTO workload (job_id, spec) VALUES (?, ?)",
                                 (spec.id, spec_to_json(spec)))
            self._db.execute("INSERT INTO meta (key, value) VALUES ('run', ?)",
                             (json.dumps(asdict(info)),))
            self._db.execute("COMMIT")
        except sqlite3.Error as exc:
            self._db.execute("ROLLBACK")
            raise InputError(f"cannot record the run: {exc}", source=self.path) from None

    def workload(self) -> list[JobSpec]:
        return [spec_from_json(r[0]) for r in self._rows("SELECT spec FROM workload ORDER BY seq")]

    # ------------------------------------------------------------ Journal (manager)

    def job_submitted(self, spec: JobSpec) -> None:
        self._write("INSERT OR IGNORE INTO submitted (job_id, spec) VALUES (?, ?)",
                    (spec.id, spec_to_json(spec)))

    def operation(self, op: Operation) -> None:
        self._write("INSERT INTO operations (time, kind, job_id, cluster, amount) "
                    "VALUES (?, ?, ?, ?, ?)", (op.time, op.kind, op.job_id, op.cluster, op.amount))

    def job_event(self, event: JobEvent) -> None:
        self._write("INSERT INTO events (time, job_id, state, size, reason) VALUES (?, ?, ?, ?, ?)",
                    (event.time, event.job_id, event.state.value, event.size, event.reason))

    # ------------------------------------------------------------ SiteJournal (adapter)

    def slurm_submitted(self, site: str, job_id: str, slurm_id: int) -> None:
        self._write("INSERT OR REPLACE INTO slurm_jobs (site, job_id, slurm_id) VALUES (?, ?, ?)",
                    (site, job_id, slurm_id))

    def resize_begin(self, site: str, job_id: str, slurm_id: int, before: int,
                     target: int) -> int:
        return self._write("INSERT INTO resizes (site, job_id, slurm_id, before, target) "
                           "VALUES (?, ?, ?, ?, ?)", (site, job_id, slurm_id, before, target))

    def resize_end(self, token: int, result: ResizeOutcome) -> None:
        self._write("UPDATE resizes SET after = ?, outcome = ?, reason = ?, seconds = ?, "
                    "helper = ? WHERE id = ?", (result.after, result.outcome.value,
                                                result.reason, result.seconds, result.helper,
                                                token))

    # ------------------------------------------------------------ reading back

    def submitted(self) -> list[JobSpec]:
        rows = self._rows("SELECT spec FROM submitted ORDER BY seq")
        return [spec_from_json(r[0]) for r in rows]

    def operations(self) -> list[Operation]:
        rows = self._rows("SELECT time, kind, job_id, cluster, amount FROM operations ORDER BY seq")
        return [Operation(float(t), str(k), str(j), str(c), int(a)) for t, k, j, c, a in rows]

    def events(self) -> list[JobEvent]:
        rows = self._rows("SELECT time, job_id, state, size, reason FROM events ORDER BY seq")
        return [JobEvent(float(t), str(j), JobState(s), int(n), str(r)) for t, j, s, n, r in rows]

    def slurm_ids(self) -> dict[tuple[str, str], int]:
        rows = self._rows("SELECT site, job_id, slurm_id FROM slurm_jobs")
        return {(str(s), str(j)): int(i) for s, j, i in rows}

    def open_resizes(self) -> list[tuple[int, str, str, int]]:
        """Resizes begun and never ended: (token, site, job id, Slurm id)."""
        rows = self._rows("SELECT id, site, job_id, slurm_id FROM resizes WHERE outcome IS NULL")
        return [(int(i), str(s), str(j), int(n)) for i, s, j, n in rows]

    def close_interrupted(self, token: int) -> None:
        self._write("UPDATE resizes SET outcome = 'interrupted', reason = ? WHERE id = ?",
                    ("the manager stopped during the resize; size read back on restart", token))

    def resize_outcomes(self) -> dict[str, int]:
        rows = self._rows("SELECT outcome, COUNT(*) FROM resizes GROUP BY outcome")
        return {str(o): int(n) for o, n in rows}


# ----------------------------------------------------------------------------- resuming


@dataclass(frozen=True, slots=True)
class Resumed:
    """What :func:`resume` found: jobs taken up, handed back to clusters, resizes closed."""

    jobs: int
    followed: int
    waiting: int
    interrupted_resizes: int


def rebuild_records(store: Store) -> tuple[list[JobRecord], dict[str, str]]:
    """The manager's records and placements, replayed from the journal."""
    records = {spec.id: JobRecord(spec) for spec in store.submitted()}
    where: dict[str, str] = {}
    for op in store.operations():
        record = records.get(op.job_id)
        if record is None:
            continue
        if op.kind == "place":
            record.place(op.time, op.cluster)
            where[op.job_id] = op.cluster
        elif op.kind == "reject" and not record.state.finished:
            record.finish(op.time, JobState.FAILED, "rejected")
        elif op.kind == "cancel" and op.job_id not in where and not record.state.finished:
            record.finish(op.time, JobState.CANCELLED)
    for event in store.events():
        record = records.get(event.job_id)
        if record is None:
            continue
        if event.state.finished:
            record.finish(event.time, event.state, event.reason)
        elif event.state is JobState.RUNNING:
            record.resize(event.time, event.size)
    return list(records.values()), where


def resume(store: Store, manager: Manager, clusters: Mapping[str, ResourceManager]) -> Resumed:
    """Rebuild ``manager`` from ``store`` and hand running jobs back to their clusters."""
    records, where = rebuild_records(store)
    manager.restore(records, where, store.operations())
    slurm_ids = store.slurm_ids()
    placed = {op.job_id: op.amount for op in store.operations() if op.kind == "place"}
    followed = 0
    for record in records:
        cluster = where.get(record.spec.id)
        if cluster is None or record.state.finished:
            continue
        adapter = clusters.get(cluster)
        if not isinstance(adapter, Adopting):
            raise InputError(f"job {record.spec.id} ran on {cluster!r}, which is not in the "
                             "config (or cannot take jobs over)", source=store.path)
        size = record.sizes[-1][1] if record.sizes else 0
        adapter.adopt(record.spec, slurm_ids.get((cluster, record.spec.id)),
              requested=placed.get(record.spec.id, size), started=record.start is not None,
              size=size, since=record.placed)
        followed += 1
    interrupted = store.open_resizes()
    for token, site, job_id, slurm_id in interrupted:
        logger.warning("resize of %s (Slurm job %d on %s) was interrupted; its size will be "
                       "read back", job_id, slurm_id, site)
        store.close_interrupted(token)
    waiting = sum(1 for r in records if not r.state.finished and r.spec.id not in where)
    return Resumed(len(records), followed, waiting, len(interrupted))
