"""Model options: mechanisms of the KOALA paper that the plain simulator leaves out.

Each is off by default, so a run without model options is the paper setting as we
model it (``docs/simulate.md``); each is quoted from the paper there.

* ``info_period`` (s): KOALA's scheduler "periodically polls the KOALA information
  service". With a period, the free-node counts the policy sees are those of the last
  poll (taken at 0, P, 2P, ...), so placement and growth are decided on a possibly
  stale snapshot; a start or a grow still gets only what is really free (a placement
  that no longer fits is deferred, counting a try). The running jobs are seen as they
  are (the runners report them).
* ``grow_latency`` (s): a grow goes through the local resource manager (MRunner
  submits GRAM jobs of size 1) and "suspension of the application does not occur
  before all the resources are held": the job takes the new processors up
  ``grow_latency`` seconds after it accepted the offer (then pays ``--reconfig-cost``).
  ``grow_hold`` says when they count as held: ``request`` (default: taken off the free
  pool at once, idle until the job takes them up) or ``arrival`` (they stay free, so a
  placement or local users may take them meanwhile; at arrival the job gets what is
  still free, as much as its size rule accepts, and the rest of the request lapses).
* ``adapt_period`` (s): applications change size only at their adaptation points,
  every ``adapt_period`` seconds from their start. A shrink's processors are released
  at the job's next adaptation point (the manager waits for them, as EGS "waits for Job
  to release the processors"), and a grow is taken up at the first adaptation point
  after its processors are held. With ``--reconfig-cost`` this is the per-resize
  suspension cost plus adaptation-point releases of the paper's runner.
* ``ft_optimum``, ``gadget2_optimum`` (nodes): U-shaped speedup curves
  ``T(n) = a + b/n + c*n`` through the end points of Fig. 6 (the standard curves' values
  at 2 and at the maximum size) with their minimum at that size ("the maximum sizes we
  have chosen are greater than the sizes for which we have observed the minimum
  execution times"). 0 keeps the Amdahl curve. The optimum is not in the paper.

The growth-only threshold is KOALA's scheduler's, so it is a policy option
(``grow_threshold`` of ``fpsma``, ``egs`` and ``equipartition``), not one of these.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any

from malleable.apps import BUILTIN, AppCatalog, AppModel, UShaped
from malleable.compiling import mypyc_attr
from malleable.errors import InputError
from malleable.model import ClusterView, JobSpec, JobState, RunningJob
from malleable.sim.cluster import SimCluster, _Job
from malleable.sim.engine import RELEASE, TIMER

HOLD_MODES = ("request", "arrival")
#: The applications whose optimum is an option, with their maximum size in the workloads.
U_SHAPED = {"ft": 32, "gadget2": 46}


# Not a native class in the compiled build (setup.py): a native frozen dataclass cannot be
# unpickled, and the sweep sends these options to its worker processes.
@mypyc_attr(native_class=False)
@dataclass(frozen=True)
class ModelOptions:
    """The optional mechanisms (all off by default); see the module docstring."""

    info_period: float = 0.0
    grow_latency: float = 0.0
    grow_hold: str = "request"
    adapt_period: float = 0.0
    ft_optimum: int = 0
    gadget2_optimum: int = 0

    def __post_init__(self) -> None:
        for name in ("info_period", "grow_latency", "adapt_period"):
            value = getattr(self, name)
            if not math.isfinite(value) or value < 0:
                raise ValueError(f"model option {name} must be a non-negative number of "
                                 f"seconds, not {value!r}")
        if self.grow_hold not in HOLD_MODES:
            raise ValueError(f"model option grow_hold must be one of {', '.join(HOLD_MODES)}, "
                             f"not {self.grow_hold!r}")
        for app in U_SHAPED:
            self.curve(app)  # ValueError for an optimum that makes no U

    @property
    def active(self) -> bool:
        """Whether any option differs from the paper setting."""
        # Field by field: in the compiled build (setup.py) ``self != ModelOptions()`` gave
        # True for equal options.
        paper = ModelOptions()
        return any(getattr(self, f.name) != getattr(paper, f.name) for f in fields(self))

    @property
    def needs_cluster(self) -> bool:
        return self.info_period > 0 or self.grow_latency > 0 or self.adapt_period > 0

    def curve(self, app: str) -> UShaped | None:
        optimum = int(getattr(self, f"{app}_optimum"))
        if optimum <= 0:
            return None
        base = BUILTIN[app].curve
        high = U_SHAPED[app]
        return UShaped(2, base(2), high, base(high), optimum)

    def catalog(self, catalog: AppCatalog) -> AppCatalog:
        """``catalog`` with the U-shaped curves asked for (the same catalog when none)."""
        models = {}
        for app in U_SHAPED:
            curve = self.curve(app)
            if curve is not None:
                models[app] = AppModel(curve, BUILTIN[app].rule)
        return catalog.with_models(models) if models else catalog

    def changed(self) -> dict[str, Any]:
        """The options that differ from the default, for summaries and labels."""
        default = ModelOptions()
        return {f.name: getattr(self, f.name) for f in fields(self)
                if getattr(self, f.name) != getattr(default, f.name)}


def model_options(options: Mapping[str, Any]) -> ModelOptions:
    """``ModelOptions`` from ``KEY=VALUE`` pairs; InputError naming the valid keys or the
    problem (an int is taken for a float, a float is refused for an int)."""
    valid = {f.name: f for f in fields(ModelOptions)}
    unknown = sorted(set(options) - set(valid))
    if unknown:
        raise InputError(f"no model option {', '.join(unknown)}; valid: {', '.join(valid)}")
    values: dict[str, Any] = {}
    for key, value in options.items():
        kind = type(getattr(ModelOptions(), key))
        ok = (isinstance(value, kind) and not isinstance(value, bool)) or (
            kind is float and isinstance(value, int) and not isinstance(value, bool))
        if not ok:
            raise InputError(f"model option {key} must be {kind.__name__}, not {value!r}")
        values[key] = kind(value)
    try:
        return ModelOptions(**values)
    except ValueError as exc:
        raise InputError(str(exc)) from None


@dataclass
class ModelledCluster(SimCluster):
    """A :class:`SimCluster` with the options of :class:`ModelOptions` that act on a cluster."""

    model: ModelOptions = field(default_factory=ModelOptions)
    _growing: dict[str, int] = field(init=False, default_factory=dict)
    _info_idle: int | None = field(init=False)

    def __post_init__(self) -> None:
        super().__post_init__()
        self._info_idle = None

    def start_polling(self) -> None:
        """Take the first snapshot now and the next every ``info_period`` seconds."""
        if self.model.info_period > 0:
            self._snapshot()

    def _snapshot(self) -> None:
        self._info_idle = self.idle
        self.engine.at(self.engine.now + self.model.info_period, self._snapshot, TIMER)

    def observe(self) -> ClusterView:
        view = super().observe()
        if self._info_idle is None or self._info_idle == view.idle:
            return view
        return replace(view, idle=self._info_idle)

    def _view(self, job: _Job) -> RunningJob:
        growing = self._growing.get(job.spec.id, 0)
        if not growing:
            return super()._view(job)
        if job.view is None:
            job.view = RunningJob(job.spec, self.name, job.size, job.start, job.managed,
                                  job.releasing, growing, resized_at=job.resized_at)
        return job.view

    # ------------------------------------------------------------------ adaptation points

    def next_point(self, job: _Job, at: float) -> float:
        """The job's first adaptation point at or after ``at`` (``at`` without them)."""
        period = self.model.adapt_period
        if period <= 0:
            return at
        k = math.ceil((at - job.start) / period - 1e-9)
        return job.start + max(0, k) * period

    # ------------------------------------------------------------------ grow

    def offer_grow(self, job_id: str, offer: int) -> int:
        if self.model.grow_latency <= 0 and self.model.adapt_period <= 0:
            return super().offer_grow(job_id, offer)
        job = self._jobs.get(job_id)
        if job is None or not job.managed or not job.spec.malleable:
            return 0
        pending = self._growing.get(job_id, 0)
        accepted = job.spec.accepts(job.size - job.releasing + pending, min(offer, self.idle))
        if accepted <= 0:
            return 0
        held = self.model.grow_hold == "request"
        if held:
            self._account(self.engine.now)
            self.idle -= accepted
            self._mark()
        self._set_growing(job, pending + accepted)
        arrival = self.engine.now + self.model.grow_latency
        when = self.next_point(job, arrival)
        self.engine.at(when, lambda: self._take_up(job, accepted, held), RELEASE)
        return accepted

    def _set_growing(self, job: _Job, nodes: int) -> None:
        if nodes:
            self._growing[job.spec.id] = nodes
        else:
            self._growing.pop(job.spec.id, None)
        job.view = None
        self._touch(job.spec.id)
        self._cached = None

    def _take_up(self, job: _Job, nodes: int, held: bool) -> None:
        if self._jobs.get(job.spec.id) is not job:
            return  # ended first; _finish gave the held nodes back
        self._set_growing(job, self._growing.get(job.spec.id, 0) - nodes)
        got = nodes if held else job.spec.accepts(job.size - job.releasing,
                                                  min(nodes, self.idle))
        if got <= 0:
            return
        self._account(self.engine.now)
        if not held:
            self.idle -= got
        self._mark()
        self._resize(job, job.size + got)

    # ------------------------------------------------------------------ shrink

    def request_shrink(self, job_id: str, amount: int, mandatory: bool) -> int:
        if self.model.adapt_period <= 0:
            return super().request_shrink(job_id, amount, mandatory)
        job = self._jobs.get(job_id)
        if job is None or not job.managed or not job.spec.malleable:
            return 0
        released = job.spec.releases(job.size - job.releasing, amount)
        if released <= 0:
            return 0
        when = self.next_point(job, self.engine.now + self.release_delay)
        if when <= self.engine.now:
            self._release(job, released)
            return released
        job.releasing += released
        job.view = None
        self._touch(job_id)
        self.engine.at(when, lambda: self._release_later(job, released), RELEASE)
        return released

    def _finish(self, job: _Job, state: JobState) -> None:
        pending = self._growing.pop(job.spec.id, 0)
        if pending and self.model.grow_hold == "request":
            self._account(self.engine.now)
            self.idle += pending  # held for a grow the job never took up
        super()._finish(job, state)


def build_clusters(specs: Mapping[str, tuple[int, int, float]], model: ModelOptions,
                   **common: Any) -> dict[str, SimCluster]:
    """Clusters (name -> (nodes, reserve, speed)) that model ``model``'s options."""
    clusters: dict[str, SimCluster] = {}
    for name, (nodes, reserve, speed) in specs.items():
        cluster = ModelledCluster(name, nodes, reserve=reserve, speed=speed, model=model,
                                  **common)
        cluster.start_polling()
        clusters[name] = cluster
    return clusters


def never_grew(spec: JobSpec, max_size: int) -> bool:
    """A malleable job whose size never went above its initial size."""
    return spec.malleable and max_size <= spec.initial_size
