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
import threading
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

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
CREATE TABLE IF NOT EXISTS extensions (site TEXT NOT NULL, job_id TEXT NOT NULL,
    native_id INTEGER NOT NULL, released INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (site, native_id));
CREATE TABLE IF NOT EXISTS resizes (id INTEGER PRIMARY KEY, site TEXT NOT NULL,
    job_id TEXT NOT NULL, slurm_id INTEGER NOT NULL, before INTEGER NOT NULL,
    target INTEGER NOT NULL, after INTEGER, outcome TEXT, reason TEXT, seconds REAL,
    helper INTEGER);
CREATE TABLE IF NOT EXISTS intents (id INTEGER PRIMARY KEY, time REAL NOT NULL,
    kind TEXT NOT NULL, site TEXT NOT NULL, job_id TEXT NOT NULL, native_id INTEGER,
    amount INTEGER NOT NULL, state TEXT NOT NULL DEFAULT 'open', detail TEXT NOT NULL DEFAULT '');
CREATE TABLE IF NOT EXISTS node_failures (id INTEGER PRIMARY KEY, site TEXT NOT NULL,
    job_id TEXT NOT NULL, entry TEXT NOT NULL);
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
class Intent:
    """An external side effect the journal recorded before it was tried.

    ``kind`` is ``submit`` (``amount`` nodes), ``cancel``, ``helper`` (an expansion's
    helper allocation ``native_id`` was granted for ``job_id``; ``amount`` its parent's
    Slurm id) or ``handover`` (the helper's nodes are being handed to the parent).
    ``state`` is ``open`` until the effect is known: ``done``, ``failed`` (it did not
    happen), ``adopted`` (found again after a restart), ``rolled back``.
    """

    token: int
    time: float
    kind: str
    site: str
    job_id: str
    native_id: int | None
    amount: int
    state: str = "open"
    detail: str = ""


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
        self._lock = threading.RLock()
        """One statement at a time on the connection: adapters' workers journal their
        negotiations while the manager's thread journals its own, and a write's token
        (``lastrowid``) is the connection's last insert, whichever thread made it."""

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
        with self._lock:
            self._db.close()

    def _write(self, sql: str, args: Sequence[Any]) -> int:
        with self._lock:
            try:
                cursor = self._db.execute(sql, tuple(args))
            except sqlite3.Error as exc:
                raise ExternalError(f"state database {self.path}: {exc}") from None
            return int(cursor.lastrowid or 0)

    def _rows(self, sql: str, args: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        with self._lock:
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
        with self._lock:
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

    def native_submitted(self, site: str, job_id: str, native_id: int) -> None:
        """The site's own id of a job (Slurm's or OAR's), submitted or adopted."""
        self._write("INSERT OR REPLACE INTO slurm_jobs (site, job_id, slurm_id) VALUES (?, ?, ?)",
                    (site, job_id, native_id))

    def slurm_submitted(self, site: str, job_id: str, slurm_id: int) -> None:
        """A Slurm site's name for :meth:`native_submitted`."""
        self.native_submitted(site, job_id, slurm_id)

    def extensions_added(self, site: str, job_id: str, native_ids: Sequence[int]) -> None:
        """A job's extension jobs (OAR's emulated growth: one single-node job each)."""
        self._extensions(site, job_id, native_ids, released=False)

    def extensions_released(self, site: str, job_id: str, native_ids: Sequence[int]) -> None:
        """Extension jobs the adapter deleted (they may linger in OAR a while)."""
        self._extensions(site, job_id, native_ids, released=True)

    def _extensions(self, site: str, job_id: str, native_ids: Sequence[int], *,
                    released: bool) -> None:
        for native_id in native_ids:
            self._write("INSERT OR REPLACE INTO extensions (site, job_id, native_id, released) "
                        "VALUES (?, ?, ?, ?)", (site, job_id, native_id, int(released)))

    def extensions(self, site: str, job_id: str) -> tuple[list[int], list[int]]:
        """A job's extension jobs on ``site``: (live, released), oldest first."""
        rows = self._rows("SELECT native_id, released FROM extensions WHERE site = ? AND "
                          "job_id = ? ORDER BY native_id", (site, job_id))
        live = [int(n) for n, r in rows if not r]
        return live, [int(n) for n, r in rows if r]

    def resize_begin(self, site: str, job_id: str, slurm_id: int, before: int,
                     target: int) -> int:
        return self._write("INSERT INTO resizes (site, job_id, slurm_id, before, target) "
                           "VALUES (?, ?, ?, ?, ?)", (site, job_id, slurm_id, before, target))

    def resize_end(self, token: int, result: ResizeOutcome) -> None:
        self._write("UPDATE resizes SET after = ?, outcome = ?, reason = ?, seconds = ?, "
                    "helper = ? WHERE id = ?", (result.after, result.outcome.value,
                                                result.reason, result.seconds, result.helper,
                                                token))

    # ------------------------------------------------------------ intents

    def intent(self, kind: str, site: str, job_id: str, amount: int = 0,
               native_id: int | None = None, time: float = 0.0) -> int:
        """Record, before trying it, a side effect on ``site``; its token."""
        return self._write("INSERT INTO intents (time, kind, site, job_id, native_id, amount) "
                           "VALUES (?, ?, ?, ?, ?, ?)",
                           (time, kind, site, job_id, native_id, amount))

    def intent_end(self, token: int, state: str, native_id: int | None = None,
                   detail: str = "") -> None:
        """What became of an intent (``native_id`` learnt on the way, if any)."""
        self._write("UPDATE intents SET state = ?, native_id = COALESCE(?, native_id), "
                    "detail = ? WHERE id = ?", (state, native_id, detail, token))

    def intents(self, state: str | None = "open") -> list[Intent]:
        """Intents in ``state`` (all with None), oldest first."""
        sql = ("SELECT id, time, kind, site, job_id, native_id, amount, state, detail "
               "FROM intents")
        rows = self._rows(sql + " ORDER BY id") if state is None else self._rows(
            sql + " WHERE state = ? ORDER BY id", (state,))
        return [Intent(int(i), float(t), str(k), str(s), str(j),
                       None if n is None else int(n), int(a), str(st), str(d))
                for i, t, k, s, j, n, a, st, d in rows]

    # ------------------------------------------------------------ node failures

    def node_failure(self, site: str, entry: Mapping[str, object]) -> None:
        """A managed job found on dead nodes, and what was done (the adapter's entry)."""
        self._write("INSERT INTO node_failures (site, job_id, entry) VALUES (?, ?, ?)",
                    (site, str(entry.get("job", "")), json.dumps(dict(entry), sort_keys=True)))

    def node_failures(self, site: str) -> list[dict[str, object]]:
        """The entries of :meth:`node_failure` for ``site``, oldest first."""
        rows = self._rows("SELECT entry FROM node_failures WHERE site = ? ORDER BY id", (site,))
        return [dict(json.loads(r[0])) for r in rows]

    # ------------------------------------------------------------ durable state of the policy

    def save_state(self, text: str) -> None:
        """The manager's exported state (policy memory, placement tries), as JSON text."""
        self._set_meta("manager_state", text)

    def saved_state(self) -> str | None:
        return self._meta("manager_state")

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
    adopted_submissions: int = 0
    """Submissions the manager was stopped around, taken up from what Slurm had."""


def rebuild_records(store: Store) -> tuple[list[JobRecord], dict[str, str]]:
    """The manager's records and placements, replayed from the journal.

    Operations and events are replayed in time order (at equal times, events first: a
    cycle drains its events before it acts), so a job given back to the queue (a WAITING
    event) and placed again is followed where it was placed last.
    """
    records = {spec.id: JobRecord(spec) for spec in store.submitted()}
    where: dict[str, str] = {}
    steps: list[tuple[float, int, int, Operation | JobEvent]] = [
        (e.time, 0, i, e) for i, e in enumerate(store.events())]
    steps += [(op.time, 1, i, op) for i, op in enumerate(store.operations())]
    for _, _, _, step in sorted(steps, key=lambda s: s[:3]):
        record = records.get(step.job_id)
        if record is None:
            continue
        if isinstance(step, Operation):
            _replay_operation(record, step, where)
        else:
            _replay_event(record, step, where)
    return list(records.values()), where


def _replay_operation(record: JobRecord, op: Operation, where: dict[str, str]) -> None:
    if op.kind == "place":
        record.place(op.time, op.cluster)
        where[op.job_id] = op.cluster
    elif op.kind == "reject" and not record.state.finished:
        record.finish(op.time, JobState.FAILED, "rejected")
    elif op.kind == "cancel" and op.job_id not in where and not record.state.finished:
        record.finish(op.time, JobState.CANCELLED)


def _replay_event(record: JobRecord, event: JobEvent, where: dict[str, str]) -> None:
    if event.state is JobState.WAITING:
        record.requeue()
        where.pop(event.job_id, None)
    elif event.state.finished:
        record.finish(event.time, event.state, event.reason)
    elif event.state is JobState.RUNNING:
        record.resize(event.time, event.size)


@runtime_checkable
class Reconciling(Protocol):
    """An adapter that can finish, after a restart, what an intent left half done."""

    def resume_intent(self, token: int, kind: str, job_id: str,
                      native_id: int | None) -> None: ...


@runtime_checkable
class RememberingFailures(Protocol):
    """An adapter that takes up, after a restart, the node failures it journaled."""

    def restore_node_failures(self, entries: Sequence[Mapping[str, object]]) -> None: ...


def _unconfirmed_submissions(store: Store, records: Sequence[JobRecord],
                             where: dict[str, str]) -> list[Intent]:
    """Submit intents of jobs the journal has back in the queue: the manager stopped
    between the intent and the place operation, so the job may be in Slurm already.
    They are taken as placed there; the adapter adopts Slurm's copy, or gives the job
    back if Slurm has none (never submitted twice)."""
    requeued: dict[str, float] = {}
    for event in store.events():
        if event.state is JobState.WAITING:
            requeued[event.job_id] = event.time
    waiting = {r.spec.id for r in records if not r.state.finished and r.spec.id not in where}
    found: dict[str, Intent] = {}
    for intent in store.intents(None):
        if (intent.kind == "submit" and intent.state in ("open", "done")
                and intent.job_id in waiting
                and intent.time >= requeued.get(intent.job_id, float("-inf"))):
            found[intent.job_id] = intent
    return list(found.values())


def resume(store: Store, manager: Manager, clusters: Mapping[str, ResourceManager]) -> Resumed:
    """Rebuild ``manager`` from ``store`` and hand running jobs back to their clusters."""
    records, where = rebuild_records(store)
    by_id = {r.spec.id: r for r in records}
    taken_up = _unconfirmed_submissions(store, records, where)
    for intent in taken_up:
        if intent.site not in clusters:
            continue
        logger.warning("%s: its submission to %s was interrupted; adopting Slurm's copy if "
                       "there is one", intent.job_id, intent.site)
        op = Operation(intent.time, "place", intent.job_id, intent.site, intent.amount)
        store.operation(op)
        by_id[intent.job_id].place(op.time, op.cluster)
        where[intent.job_id] = intent.site
    manager.restore(records, where, store.operations())
    saved = store.saved_state()
    if saved:
        manager.import_state(json.loads(saved))
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
    for name, adapter in clusters.items():
        if isinstance(adapter, RememberingFailures):
            adapter.restore_node_failures(store.node_failures(name))
    _resume_intents(store, clusters)
    interrupted = store.open_resizes()
    for token, site, job_id, slurm_id in interrupted:
        logger.warning("resize of %s (Slurm job %d on %s) was interrupted; its size will be "
                       "read back", job_id, slurm_id, site)
        store.close_interrupted(token)
    waiting = sum(1 for r in records if not r.state.finished and r.spec.id not in where)
    return Resumed(len(records), followed, waiting, len(interrupted), len(taken_up))


def _resume_intents(store: Store, clusters: Mapping[str, ResourceManager]) -> None:
    """Hand every open intent (submit, cancel, helper, hand-over) to its site to finish
    (at its next poll); one no site here can finish is closed ``moot``, with a warning."""
    for intent in store.intents("open"):
        adapter = clusters.get(intent.site)
        if isinstance(adapter, Reconciling):
            adapter.resume_intent(intent.token, intent.kind, intent.job_id, intent.native_id)
            continue
        why = ("its site is not in this run" if adapter is None
               else "its site cannot finish intents")
        logger.warning("%s intent of %s on %s left open before the restart: abandoned (%s)",
                       intent.kind, intent.job_id, intent.site, why)
        store.intent_end(intent.token, "moot", detail=why)
