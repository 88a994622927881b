"""Run a workload through the manager on simulated clusters.

The manager and the policy are the very objects that run against real clusters;
here the engine's clock calls ``Manager.cycle`` after each batch of events (and,
with ``poll_interval``, periodically, as a real manager polls).
"""

from __future__ import annotations

import gc
from collections import deque
from collections.abc import Callable, Iterator, MutableSequence, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Protocol, cast

from malleable.apps import AppCatalog, standard_catalog
from malleable.errors import InputError
from malleable.manager import Manager
from malleable.metrics.records import JobRecord
from malleable.metrics.summary import Tee
from malleable.model import Cluster, JobSpec, Operation
from malleable.policies.base import Policy
from malleable.sim.background import BackgroundLoad, BackgroundSpec, TraceBackground, TraceLoad
from malleable.sim.cluster import SimCluster
from malleable.sim.engine import ARRIVAL, TIMER, Engine
from malleable.sim.model_options import ModelOptions, build_clusters


@dataclass(frozen=True)
class SimConfig:
    """Knobs of the simulated platform (times in seconds)."""

    reconfig_cost: float = 0.0
    release_delay: float = 0.0
    poll_interval: float | None = None
    max_tries: int | None = None
    background: BackgroundSpec | None = None
    seed: int = 0
    timeline: bool = True
    model: ModelOptions | None = None
    """Optional mechanisms of the KOALA paper (:mod:`malleable.sim.model_options`)."""
    background_trace: TraceBackground | None = None
    """Local users' load replayed from a real log (alone, or with ``background``)."""


@dataclass
class SimResult:
    """What a simulation produced: per-job records, operations and the platform."""

    records: list[JobRecord]
    operations: list[Operation]
    clusters: tuple[Cluster, ...]
    start: float
    end: float
    busy_area: float
    timelines: dict[str, list[tuple[float, int]]] = field(default_factory=dict)
    background: dict[str, float] = field(default_factory=dict)
    """With a ``background_trace``: its jobs and utilization (:meth:`TraceLoad.stats`)."""

    @property
    def makespan(self) -> float:
        return self.end - self.start

    @property
    def utilization(self) -> float:
        capacity = sum(c.nodes for c in self.clusters) * self.end
        return self.busy_area / capacity if capacity > 0 else 0.0


def check_jobs(jobs: Sequence[JobSpec], catalog: AppCatalog | None = None) -> None:
    """InputError for unknown applications (not in ``catalog``, the standard one by
    default) or duplicate ids, before anything runs."""
    catalog = catalog if catalog is not None else standard_catalog()
    seen: set[str] = set()
    for spec in jobs:
        if spec.id in seen:
            raise InputError(f"job id {spec.id} appears twice")
        seen.add(spec.id)
        if not catalog.known(spec.app):
            raise InputError(f"job {spec.id}: unknown application {spec.app!r}")
        needs_runtime = spec.app == "fixed" or spec.app.startswith("amdahl:")
        if needs_runtime and spec.runtime is None:
            raise InputError(f"job {spec.id}: application {spec.app} needs a run time")


#: Where :func:`simulate` hands each job over once it is done with it: the job's record and
#: the grows and shrinks the manager performed on it.
RecordSink = Callable[[JobRecord, int, int], None]


def simulate(jobs: Sequence[JobSpec] | JobBatches, clusters: Sequence[Cluster],
             policy: Policy, config: SimConfig = SimConfig(), *,
             catalog: AppCatalog | None = None, sink: RecordSink | None = None,
             consume: bool = False) -> SimResult:
    """Simulate ``jobs`` (any order; or :class:`JobBatches`, checked and in submit order)
    on ``clusters`` under ``policy``, their applications modelled by ``catalog`` (the
    standard one by default).

    With a ``sink``, the run keeps memory for the live jobs only: each job's record is
    handed to ``sink`` (with its grow and shrink counts) once it and every job submitted
    before it have ended, in submission order, and the manager then forgets it; the
    operations are counted as they happen and not kept. :attr:`SimResult.records` and
    :attr:`SimResult.operations` are then empty. With ``consume`` too, ``jobs`` (a list)
    is emptied once sorted, so that each job's spec is dropped when its record is.
    """
    catalog = catalog if catalog is not None else standard_catalog()
    source = _source(jobs, catalog, sink, consume)
    start = source.first_submit
    engine = Engine(0.0)
    if config.model is not None and config.model.active:
        catalog = config.model.catalog(catalog)
    sims = _clusters(clusters, engine, config, catalog)
    manager = Manager(policy, sims, max_tries=config.max_tries)
    background = (BackgroundLoad(config.background, list(sims.values()), config.seed)
                  if config.background else None)
    replay = (TraceLoad(config.background_trace, list(sims.values()))
              if config.background_trace is not None else None)
    feed = _Feed(engine, manager, source, keep=sink is not None)
    handed = _Handover(manager, feed.kept, sink) if sink is not None else None
    total = len(source)  # a JobTable's __len__ is Python code: not once a cycle
    ended = 0  # jobs submitted and not unfinished at the last hand-over

    def on_step(now: float) -> bool:
        nonlocal ended
        if background is not None:
            background.start_waiting()
        if replay is not None:
            replay.start_waiting()
        done = len(manager.operations)
        manager.cycle(now)
        if len(manager.operations) > done and _changed_the_field(manager, done):
            # React to our own changes at once, as a real manager's next poll would.
            engine.at(now, _nothing, TIMER)
        if background is not None:
            background.start_waiting()
        if replay is not None:
            replay.start_waiting()
        unfinished = manager.unfinished
        if handed is not None and feed.submitted - unfinished != ended:
            # only when a job ended (or went back to the queue): a cycle after arrivals
            # alone has nothing to hand over, and its operations are counted at the next
            ended = feed.submitted - unfinished
            handed.step()
        return unfinished > 0 or feed.submitted < total

    if config.poll_interval:
        _poll(engine, config.poll_interval)
    with collector_eased():
        end = engine.run(on_step)
    if background is not None:
        background.stop = True
    local: dict[str, float] = {}
    if replay is not None:
        replay.stop = True
        local = replay.stats(end)
    if handed is not None:
        handed.step(everything=True)
    area = sum(s.utilization(end) * s.nodes * end for s in sims.values())
    timelines = {n: s.timeline for n, s in sims.items() if s.timeline is not None}
    return SimResult(list(manager.records.values()), manager.operations, tuple(clusters),
                     start, end, area, timelines, local)


def _source(jobs: Sequence[JobSpec] | JobBatches, catalog: AppCatalog,
            sink: RecordSink | None, consume: bool) -> JobBatches:
    """The jobs as batches in submit order: a list checked and sorted here, or batches
    that are so already."""
    if not isinstance(jobs, Sequence):
        return jobs
    check_jobs(jobs, catalog)
    ordered = sorted(jobs, key=lambda j: j.submit_time)
    if consume:
        if sink is None or not isinstance(jobs, MutableSequence):
            raise ValueError("consume needs a sink and a list of jobs")
        del jobs[:]
    return _ListBatches(ordered)


class JobBatches(Protocol):
    """Jobs already checked (as :func:`check_jobs` checks them) and sorted by submit time,
    handed out a batch at a time (:class:`~malleable.workloads.swf_plain.JobTable`: a
    trace whose jobs exist as objects only once they are due)."""

    @property
    def first_submit(self) -> float:
        """The first job's submit time (0.0 without jobs)."""
        ...

    def __len__(self) -> int: ...

    def batch(self, start: int, stop: int) -> list[JobSpec]:
        """Jobs ``start`` to ``stop`` (excluded), asked for once each, in order."""
        ...


class _ListBatches:
    """A sorted list of jobs as :class:`JobBatches`; a job handed out leaves the list (the
    list does not keep it alive once the run is done with it)."""

    __slots__ = ("_jobs",)

    def __init__(self, jobs: list[JobSpec]) -> None:
        self._jobs = cast(list[JobSpec | None], jobs)  # taken over, not copied

    @property
    def first_submit(self) -> float:
        first = self._jobs[0] if self._jobs else None
        return first.submit_time if first is not None else 0.0

    def __len__(self) -> int:
        return len(self._jobs)

    def batch(self, start: int, stop: int) -> list[JobSpec]:
        part = cast(list[JobSpec], self._jobs[start:stop])
        self._jobs[start:stop] = [None] * len(part)
        return part


def _clusters(clusters: Sequence[Cluster], engine: Engine, config: SimConfig,
              catalog: AppCatalog) -> dict[str, SimCluster]:
    """The simulated clusters: plain ones, or ones that model ``config.model``'s options."""
    if config.model is not None and config.model.needs_cluster:
        return build_clusters({c.name: (c.nodes, c.reserve, c.speed) for c in clusters},
                              config.model, engine=engine, reconfig_cost=config.reconfig_cost,
                              release_delay=config.release_delay,
                              timeline=[] if config.timeline else None, catalog=catalog)
    return {c.name: SimCluster(c.name, c.nodes, engine, c.reserve, c.speed,
                               config.reconfig_cost, config.release_delay,
                               timeline=[] if config.timeline else None, catalog=catalog)
            for c in clusters}


@contextmanager
def collector_eased(young: int = 10_000, paused: bool = False) -> Iterator[None]:
    """Python's cyclic garbage collector, eased for a run: what exists already (the
    workload) is frozen out of its sight and the young generation is collected every
    ``young`` allocations instead of 700. A run makes many objects and almost no cycles;
    at 100k jobs the collector took ~9% of the CPU time, 2% after (751 -> 51 passes).
    With ``paused``, the collector does not run at all (for reading a workload: a million
    objects and no reference cycle; at 1M jobs the read took 7.9 s eased, 7.4 s paused).
    Every setting is restored on the way out."""
    threshold = gc.get_threshold()
    enabled = gc.isenabled()
    gc.freeze()
    gc.set_threshold(max(young, threshold[0]), *threshold[1:])
    if paused:
        gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
        gc.set_threshold(*threshold)
        gc.unfreeze()


def _nothing() -> None:
    pass


def _changed_the_field(manager: Manager, since: int) -> bool:
    """Did the last cycle start a malleable job (it may grow now) or shrink one (its
    nodes may be free now)? A rigid start changes nothing a second look would use."""
    operations = manager.operations
    for i in range(since, len(operations)):  # no slice a cycle
        op = operations[i]
        if op.kind == "shrink":
            return True
        if op.kind == "place" and manager.records[op.job_id].spec.malleable:
            return True
    return False


class _Handover:
    """Hands the ended jobs' records to a sink in submission order and makes the manager
    forget them; counts each job's grows and shrinks as the operations are logged (the
    operations themselves are not kept)."""

    __slots__ = ("_manager", "_resizes", "_sink", "_submitted")

    def __init__(self, manager: Manager, submitted: deque[JobSpec], sink: RecordSink) -> None:
        self._manager = manager
        self._submitted = submitted  # the jobs submitted and not yet handed over, in order
        self._sink = sink
        self._resizes: dict[str, tuple[int, int]] = {}

    def step(self, everything: bool = False) -> None:
        """Count the new operations, then hand over the ended jobs that can go (with
        ``everything``, at the end of the run: every submitted job, ended or not)."""
        manager = self._manager
        operations = manager.operations
        if operations:
            resizes = self._resizes
            for op in operations:
                kind = op.kind
                if kind == "grow" or kind == "shrink":
                    grows, shrinks = resizes.get(op.job_id, (0, 0))
                    resizes[op.job_id] = ((grows + 1, shrinks) if kind == "grow"
                                          else (grows, shrinks + 1))
            operations.clear()
        records, submitted = manager.records, self._submitted
        sink, resizes, ended = self._sink, self._resizes, []
        # simulate's own sink (jobs.csv and the summary) called as the method it is:
        # compiled, a direct call, not Python's call protocol with a tuple of arguments
        tee = sink if type(sink) is Tee else None
        while submitted:
            job_id = submitted[0].id
            record = records[job_id]
            if record.state.finished:
                ended.append(job_id)
            elif not everything:
                break
            grows, shrinks = resizes.pop(job_id, _NO_RESIZES) if resizes else _NO_RESIZES
            if tee is not None:
                tee.__call__(record, grows, shrinks)
            else:
                sink(record, grows, shrinks)
            submitted.popleft()
        if ended:
            manager.forget(ended)


_NO_RESIZES = (0, 0)

#: How many jobs :class:`_Feed` takes from its source at a time.
FEED_BATCH = 1024


class _Feed:
    """Submits the jobs at their times, one arrival event scheduled at a time, taking them
    from the source :data:`FEED_BATCH` at a time; with ``keep``, the jobs submitted are
    kept in order (for :class:`_Handover`, which lets them go)."""

    __slots__ = ("_at", "_batch", "_engine", "_manager", "_source", "kept", "submitted")

    def __init__(self, engine: Engine, manager: Manager, source: JobBatches,
                 keep: bool) -> None:
        self._engine = engine
        self._manager = manager
        self._source = source
        self._batch: list[JobSpec] = []
        self._at = 0  # the next job's place in the batch
        self.submitted = 0
        self.kept: deque[JobSpec] = deque()
        if not keep:
            self.kept = deque(maxlen=0)
        first = self._next()
        if first is not None:
            engine.at(first.submit_time, self.arrive, ARRIVAL)

    def _next(self) -> JobSpec | None:
        """The next job to submit (None: no more)."""
        if self._at == len(self._batch):
            start = self.submitted
            self._batch = self._source.batch(start, min(start + FEED_BATCH,
                                                        len(self._source)))
            self._at = 0
            if not self._batch:
                return None
        return self._batch[self._at]

    def arrive(self) -> None:
        now = self._engine.now
        submit, kept = self._manager.submit, self.kept
        while True:
            batch, at = self._batch, self._at
            if at == len(batch):  # _next only for a new batch: not twice a job
                if self._next() is None:
                    return
                continue
            spec = batch[at]
            if spec.submit_time > now:
                self._engine.at(spec.submit_time, self.arrive, ARRIVAL)
                return
            submit(spec)
            kept.append(spec)
            self._at = at + 1
            self.submitted += 1


def _poll(engine: Engine, interval: float) -> None:
    def tick() -> None:
        engine.at(engine.now + interval, tick, TIMER)

    engine.at(engine.now + interval, tick, TIMER)

