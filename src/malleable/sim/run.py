"""Run a workload through the manager on simulated clusters.

The manager and the policy are the very objects that run against real clusters;
here the engine's clock calls ``Manager.cycle`` after each batch of events (and,
with ``poll_interval``, periodically, as a real manager polls).
"""

from __future__ import annotations

import gc
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field

from malleable.apps import AppCatalog, standard_catalog
from malleable.errors import InputError
from malleable.manager import Manager
from malleable.metrics.records import JobRecord
from malleable.model import Cluster, JobSpec, Operation
from malleable.policies.base import Policy
from malleable.sim.background import BackgroundLoad, BackgroundSpec
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


def simulate(jobs: Sequence[JobSpec], clusters: Sequence[Cluster], policy: Policy,
             config: SimConfig = SimConfig(), *,
             catalog: AppCatalog | None = None) -> SimResult:
    """Simulate ``jobs`` (any order) on ``clusters`` under ``policy``, their applications
    modelled by ``catalog`` (the standard one by default)."""
    catalog = catalog if catalog is not None else standard_catalog()
    check_jobs(jobs, catalog)
    ordered = sorted(jobs, key=lambda j: j.submit_time)
    engine = Engine(0.0)
    if config.model is not None and config.model.active:
        catalog = config.model.catalog(catalog)
    sims = _clusters(clusters, engine, config, catalog)
    manager = Manager(policy, sims, max_tries=config.max_tries)
    background = (BackgroundLoad(config.background, list(sims.values()), config.seed)
                  if config.background else None)
    _feed(engine, manager, ordered)
    pending = [len(ordered)]

    def on_step(now: float) -> bool:
        if background is not None:
            background.start_waiting()
        done = len(manager.operations)
        manager.cycle(now)
        if _changed_the_field(manager, done):
            # React to our own changes at once, as a real manager's next poll would.
            engine.at(now, _nothing, TIMER)
        if background is not None:
            background.start_waiting()
        return manager.unfinished > 0 or len(manager.records) < pending[0]

    if config.poll_interval:
        _poll(engine, config.poll_interval)
    with collector_eased():
        end = engine.run(on_step)
    if background is not None:
        background.stop = True
    start = ordered[0].submit_time if ordered else 0.0
    area = sum(s.utilization(end) * s.nodes * end for s in sims.values())
    timelines = {n: s.timeline for n, s in sims.items() if s.timeline is not None}
    return SimResult(list(manager.records.values()), manager.operations, tuple(clusters),
                     start, end, area, timelines)


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
def collector_eased(young: int = 10_000) -> Iterator[None]:
    """Python's cyclic garbage collector, eased for a run: what exists already (the
    workload) is frozen out of its sight and the young generation is collected every
    ``young`` allocations instead of 700. A run makes many objects and almost no cycles;
    at 100k jobs the collector took ~9% of the CPU time, 2% after (751 -> 51 passes).
    Both settings are restored on the way out."""
    threshold = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(max(young, threshold[0]), *threshold[1:])
    try:
        yield
    finally:
        gc.set_threshold(*threshold)
        gc.unfreeze()


def _nothing() -> None:
    pass


def _changed_the_field(manager: Manager, since: int) -> bool:
    """Did the last cycle start a malleable job (it may grow now) or shrink one (its
    nodes may be free now)? A rigid start changes nothing a second look would use."""
    for op in manager.operations[since:]:
        if op.kind == "shrink":
            return True
        if op.kind == "place" and manager.records[op.job_id].spec.malleable:
            return True
    return False


def _feed(engine: Engine, manager: Manager, ordered: list[JobSpec]) -> None:
    """Submit the jobs at their times, one arrival event scheduled at a time."""
    index = [0]

    def arrive() -> None:
        i = index[0]
        now = engine.now
        while i < len(ordered) and ordered[i].submit_time <= now:
            manager.submit(ordered[i])
            i += 1
        index[0] = i
        if i < len(ordered):
            engine.at(ordered[i].submit_time, arrive, ARRIVAL)

    if ordered:
        engine.at(ordered[0].submit_time, arrive, ARRIVAL)


def _poll(engine: Engine, interval: float) -> None:
    def tick() -> None:
        engine.at(engine.now + interval, tick, TIMER)

    engine.at(engine.now + interval, tick, TIMER)

