"""Jobs, clusters, views and actions: the vocabulary shared by policies, the
manager, the simulator and the real-cluster adapters.

Everything here is a frozen dataclass or an enum. A policy reads a :class:`View`
(what every cluster looks like now, and the manager's placement queue) and
yields :class:`Action` objects; nothing in this module does I/O.
"""

from __future__ import annotations

import copyreg
import dataclasses
import enum
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import FunctionType, MappingProxyType, MemberDescriptorType
from typing import Any, TypeVar

from malleable.compiling import mypyc_attr

_EMPTY: Mapping[str, float] = MappingProxyType({})

# ----------------------------------------------------------------------------- quick_init
#
# A faster ``__init__`` for the frozen, slotted dataclasses built on every cycle.
#
# A frozen dataclass's generated ``__init__`` sets each field through
# ``object.__setattr__(self, name, value)``: a global lookup, an attribute lookup and a
# generic call, for every field. The simulator builds several such values per job
# (views of clusters and running jobs, events, operations, actions), and at 1.3-1.5 µs
# for a 9-field view that was about a sixth of a simulated job's cost.
#
# :func:`quick_init` replaces that ``__init__`` with one of the same signature (the same
# parameters, defaults, default factories and keyword-only parameters) and the same
# effect (fields that are not ``init`` get their default, ``__post_init__`` runs) that
# stores each field through its slot's own descriptor, about twice as fast. The class
# stays frozen: assigning a field afterwards still raises ``FrozenInstanceError``.
# Equality, hashing, ``repr`` and pickling are the dataclass's own, untouched. A class that
# writes its own ``__init__`` (this module's, see "construction" at its end) gets it replaced
# too; the written one is kept as the new one's ``__wrapped__``.
#
# A class it cannot handle (not a slotted dataclass, or with ``InitVar`` fields) is
# refused at import time with ``TypeError``, so it never silently changes meaning.

_T = TypeVar("_T")


class _Missing:
    """The default of a parameter whose field has a default factory."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<factory>"


_FACTORY: Any = _Missing()


def quick_init(cls: type[_T]) -> type[_T]:
    """Give the frozen, slotted dataclass ``cls`` a faster ``__init__`` (see the module)."""
    if not dataclasses.is_dataclass(cls) or "__slots__" not in cls.__dict__:
        raise TypeError(f"quick_init needs a slotted dataclass, not {cls.__name__}")
    klass: Any = cls  # the dataclass attributes, unknown to the type checker
    if klass.__dataclass_params__.init is False:
        raise TypeError(f"quick_init: {cls.__name__} has no generated __init__ to replace")
    names: dict[str, Any] = {"_FACTORY": _FACTORY}
    positional: list[str] = []
    keyword: list[str] = []
    body: list[str] = []
    for f in klass.__dataclass_fields__.values():  # InitVars too, unlike fields()
        if repr(getattr(f, "_field_type", None)) == "_FIELD_INITVAR":
            raise TypeError(f"quick_init: {cls.__name__}.{f.name} is an InitVar")
    for f in dataclasses.fields(cls):
        slot = getattr(cls, f.name, None)
        if not isinstance(slot, MemberDescriptorType):
            raise TypeError(f"quick_init: {cls.__name__}.{f.name} is not a slot")
        names[f"_set_{f.name}"] = slot.__set__
        has_factory = f.default_factory is not dataclasses.MISSING
        if has_factory:
            names[f"_factory_{f.name}"] = f.default_factory
        if f.default is not dataclasses.MISSING:
            names[f"_default_{f.name}"] = f.default
        if not f.init:
            value = (f"_factory_{f.name}()" if has_factory else f"_default_{f.name}"
                     if f.default is not dataclasses.MISSING else None)
            if value is not None:  # a field with neither is left unset, as dataclasses do
                body.append(f"    _set_{f.name}(self, {value})")
            continue
        if has_factory:
            param = f"{f.name}=_FACTORY"
            body.append(f"    _set_{f.name}(self, _factory_{f.name}() "
                        f"if {f.name} is _FACTORY else {f.name})")
        else:
            param = (f"{f.name}=_default_{f.name}" if f.default is not dataclasses.MISSING
                     else f.name)
            body.append(f"    _set_{f.name}(self, {f.name})")
        (keyword if f.kw_only else positional).append(param)
    if hasattr(cls, "__post_init__"):
        body.append("    self.__post_init__()")
    params = ", ".join(["self", *positional, *(["*", *keyword] if keyword else [])])
    source = f"def __init__({params}):\n" + ("\n".join(body) or "    pass") + "\n"
    exec(source, names)  # generated from the fields only, as dataclasses does
    init = names["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__module__ = cls.__module__
    init.__doc__ = klass.__init__.__doc__
    init.__wrapped__ = klass.__init__  # the one replaced (functools' convention)
    klass.__init__ = init
    return cls



class JobKind(enum.Enum):
    """How a job's size may change (Feitelson and Rudolph's classes)."""

    RIGID = "rigid"
    """Runs at exactly one size, chosen by the user."""
    MOLDABLE = "moldable"
    """The scheduler picks the size at start, within [min, max]; it never changes after."""
    MALLEABLE = "malleable"
    """The scheduler may grow or shrink the job while it runs, within [min, max]."""


class SizeRule(enum.Enum):
    """Which total sizes an application accepts when offered a resize.

    The scheduler does not implement application constraints: it offers, and the
    application answers with what it accepts (KOALA section VI-A).
    """

    ANY = "any"
    """Any size within [min, max] (GADGET-2, Jacobi...)."""
    POW2 = "pow2"
    """Only powers of two: takes the largest power of two that fits (NAS FT)."""

    def largest_fit(self, limit: int) -> int:
        """Largest accepted total size not above ``limit`` (0 when none)."""
        if limit < 1:
            return 0
        if self is SizeRule.POW2:
            return 1 << (limit.bit_length() - 1)
        return limit


@dataclass(frozen=True, slots=True)
class JobSpec:
    """A job as submitted: what it needs, not what it got.

    ``app`` names an application model (see :mod:`malleable.apps`); ``runtime``
    is used by the ``fixed`` application (a job that takes ``runtime`` seconds at
    its initial size and does not speed up). Times are in seconds.
    """

    id: str
    kind: JobKind
    min_size: int
    max_size: int
    initial_size: int
    submit_time: float = 0.0
    app: str = "fixed"
    runtime: float | None = None
    preferred_size: int | None = None
    size_rule: SizeRule = SizeRule.ANY
    walltime: float | None = None
    user: str = ""
    group: str = ""

    def __init__(self, id: str, kind: JobKind, min_size: int, max_size: int,
                 initial_size: int, submit_time: float = 0.0, app: str = "fixed",
                 runtime: float | None = None, preferred_size: int | None = None,
                 size_rule: SizeRule = SizeRule.ANY, walltime: float | None = None,
                 user: str = "", group: str = "") -> None:
        object.__setattr__(self, "id", id)
        object.__setattr__(self, "kind", kind)
        object.__setattr__(self, "min_size", min_size)
        object.__setattr__(self, "max_size", max_size)
        object.__setattr__(self, "initial_size", initial_size)
        object.__setattr__(self, "submit_time", submit_time)
        object.__setattr__(self, "app", app)
        object.__setattr__(self, "runtime", runtime)
        object.__setattr__(self, "preferred_size", preferred_size)
        object.__setattr__(self, "size_rule", size_rule)
        object.__setattr__(self, "walltime", walltime)
        object.__setattr__(self, "user", user)
        object.__setattr__(self, "group", group)
        self.__post_init__()

    def __post_init__(self) -> None:
        problem = self.problem()
        if problem:
            raise ValueError(f"job {self.id}: {problem}")

    def problem(self) -> str:
        """Why this spec is invalid, or "" when it is fine."""
        if self.min_size < 1:
            return f"minimum size {self.min_size} is below 1"
        if self.min_size > self.max_size:
            return f"minimum size {self.min_size} is above maximum size {self.max_size}"
        if not self.min_size <= self.initial_size <= self.max_size:
            return (f"initial size {self.initial_size} is outside "
                    f"[{self.min_size}, {self.max_size}]")
        if self.kind is JobKind.RIGID and self.min_size != self.max_size:
            return "a rigid job needs minimum size == maximum size"
        if self.preferred_size is not None and not (
            self.min_size <= self.preferred_size <= self.max_size
        ):
            return (f"preferred size {self.preferred_size} is outside "
                    f"[{self.min_size}, {self.max_size}]")
        if self.submit_time < 0 or not math.isfinite(self.submit_time):
            return f"submit time {self.submit_time} is negative or not finite"
        if self.runtime is not None and not (self.runtime >= 0 and math.isfinite(self.runtime)):
            return f"run time {self.runtime} is negative or not finite"
        return ""

    @property
    def malleable(self) -> bool:
        return self.kind is JobKind.MALLEABLE

    def accepts(self, current: int, offered: int) -> int:
        """How many of ``offered`` extra processors the job takes (a grow offer)."""
        limit = min(self.max_size, current + offered)
        target = self.size_rule.largest_fit(limit)
        return max(0, target - current)

    def releases(self, current: int, asked: int) -> int:
        """How many processors the job gives back when asked for ``asked`` (a shrink).

        It never goes below its minimum; with a size rule it may give back more than
        asked (an FFT at 8 asked for 1 goes to 4 and releases 4), but never more than
        it must to reach an accepted size at or below ``current - asked``.
        """
        limit = max(self.min_size, current - asked)
        target = self.size_rule.largest_fit(limit)
        if target < self.min_size:  # no accepted size between min and limit
            return 0
        return max(0, current - target)


class JobState(enum.Enum):
    """Where a job is in its life, as the manager and the adapters report it."""

    WAITING = "waiting"
    """In the manager's placement queue, not yet submitted to a cluster."""
    PENDING = "pending"
    """Submitted to a cluster, queued there."""
    RUNNING = "running"
    """Holding nodes and running."""
    COMPLETED = "completed"
    """Ended by itself with success."""
    FAILED = "failed"
    """Ended by itself with an error, or could not be placed within its tries."""
    CANCELLED = "cancelled"
    """Ended by a user, the manager or the resource manager."""
    TIMEOUT = "timeout"
    """Killed because it overran its wall time."""
    UNKNOWN = "unknown"
    """A state the adapter cannot map; never taken for completed."""

    finished: bool
    """Completed, failed, cancelled or timed out: the job is over. A plain attribute of
    each member (set below), not a property: a simulation reads it about nine times a
    job, and a set lookup of a member runs ``Enum.__hash__``, which is Python code."""


_FINISHED = frozenset({JobState.COMPLETED, JobState.FAILED, JobState.CANCELLED, JobState.TIMEOUT})
for _state in JobState:
    _state.finished = _state in _FINISHED
del _state


@dataclass(frozen=True, slots=True)
class RunningJob:
    """A job holding nodes on a cluster.

    ``releasing`` counts processors the job has agreed to give back but still holds;
    ``growing`` counts processors allocated to it that it has not taken up yet.
    ``feedback`` carries what the application last reported (for example
    ``parallelism`` or ``efficiency`` per quantum), empty when it reports nothing.
    ``managed`` is False for background load (jobs the manager did not submit).
    ``resized_at`` is when the job last changed size (its start if it never did), or
    None when the adapter does not know; policies with reconfiguration inhibitors
    (DMRlib's scheduling period) read it.
    """

    spec: JobSpec
    cluster: str
    size: int
    start_time: float
    managed: bool = True
    releasing: int = 0
    growing: int = 0
    feedback: Mapping[str, float] = field(default_factory=lambda: _EMPTY)
    resized_at: float | None = None

    def __init__(self, spec: JobSpec, cluster: str, size: int, start_time: float,
                 managed: bool = True, releasing: int = 0, growing: int = 0,
                 feedback: Mapping[str, float] = _FACTORY, resized_at: float | None = None
                 ) -> None:
        object.__setattr__(self, "spec", spec)
        object.__setattr__(self, "cluster", cluster)
        object.__setattr__(self, "size", size)
        object.__setattr__(self, "start_time", start_time)
        object.__setattr__(self, "managed", managed)
        object.__setattr__(self, "releasing", releasing)
        object.__setattr__(self, "growing", growing)
        object.__setattr__(self, "feedback", _EMPTY if feedback is _FACTORY else feedback)
        object.__setattr__(self, "resized_at", resized_at)

    @property
    def id(self) -> str:
        return self.spec.id

    @property
    def can_grow(self) -> bool:
        return self.managed and self.spec.malleable and self.size < self.spec.max_size

    @property
    def can_shrink(self) -> bool:
        return self.managed and self.spec.malleable and self.size > self.spec.min_size


@dataclass(frozen=True, slots=True)
class ClusterView:
    """What one cluster looks like at the time of the view.

    ``idle`` counts nodes that are free now (processors still being released are
    not idle). ``reserve`` is the number of nodes the manager must leave to local
    users: it never grows or places into them. ``running`` maps job id to job, for
    the manager's jobs and for background jobs alike (``managed`` tells which).
    ``online`` is False while the manager cannot reach the site (:mod:`malleable.health`):
    the view then keeps its last known size, so a job that fits only there is not
    refused, but shows no idle node and none of its jobs, so nothing is done there.
    ``changes`` is ``(log, length)`` when the source keeps a log of the ids whose entry
    in ``running`` changed (a start, an end, a resize), appended in order and shared by
    its successive views (the simulated cluster keeps one): a reader that last saw the
    same log at length ``p`` finds every id changed since then in ``log[p:length]``
    (a new log object means: compare everything). None: no log (compare everything).
    """

    name: str
    nodes: int
    idle: int
    reserve: int = 0
    running: Mapping[str, RunningJob] = field(default_factory=dict)
    pending: int = 0
    speed: float = 1.0
    online: bool = True
    changes: tuple[Sequence[str], int] | None = field(default=None, compare=False,
                                                      repr=False)
    _malleable: tuple[RunningJob, ...] | None = field(default=None, init=False, repr=False,
                                                      compare=False)
    """:meth:`malleable_jobs`, kept once computed (the view never changes)."""

    def __init__(self, name: str, nodes: int, idle: int, reserve: int = 0,
                 running: Mapping[str, RunningJob] = _FACTORY, pending: int = 0,
                 speed: float = 1.0, online: bool = True,
                 changes: tuple[Sequence[str], int] | None = None) -> None:
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "nodes", nodes)
        object.__setattr__(self, "idle", idle)
        object.__setattr__(self, "reserve", reserve)
        object.__setattr__(self, "running", {} if running is _FACTORY else running)
        object.__setattr__(self, "pending", pending)
        object.__setattr__(self, "speed", speed)
        object.__setattr__(self, "online", online)
        object.__setattr__(self, "changes", changes)
        object.__setattr__(self, "_malleable", None)

    @property
    def available(self) -> int:
        """Idle nodes the manager may use (idle minus the reserve)."""
        available = self.idle - self.reserve  # not max(): several calls a cycle a cluster
        return available if available > 0 else 0

    @property
    def background(self) -> int:
        """Nodes held by jobs the manager did not submit."""
        return sum(j.size for j in self.running.values() if not j.managed)

    def malleable_jobs(self) -> list[RunningJob]:
        """The manager's running malleable jobs here, oldest first (ties by id).

        Sorted once per view: a simulated cluster hands out the same view until one of
        its jobs changes, and KOALA's policies ask on every cycle.
        """
        if self._malleable is None:
            jobs = [j for j in self.running.values() if j.managed and j.spec.malleable]
            jobs.sort(key=lambda j: (j.start_time, j.id))
            object.__setattr__(self, "_malleable", tuple(jobs))
            return jobs
        return list(self._malleable)


@dataclass(frozen=True, slots=True)
class WaitingJob:
    """A job in the manager's placement queue, with its failed placement tries."""

    spec: JobSpec
    tries: int = 0

    def __init__(self, spec: JobSpec, tries: int = 0) -> None:
        object.__setattr__(self, "spec", spec)
        object.__setattr__(self, "tries", tries)

    @property
    def id(self) -> str:
        return self.spec.id


@dataclass(frozen=True, slots=True)
class View:
    """Everything a policy may look at: the clusters and the placement queue.

    A view does not change while a policy decides: actions take effect after the
    decision (the simulator and the adapters both honour this).
    """

    time: float
    clusters: Mapping[str, ClusterView]
    waiting: Sequence[WaitingJob] = ()

    def __init__(self, time: float, clusters: Mapping[str, ClusterView],
                 waiting: Sequence[WaitingJob] = ()) -> None:
        object.__setattr__(self, "time", time)
        object.__setattr__(self, "clusters", clusters)
        object.__setattr__(self, "waiting", waiting)

    def job(self, job_id: str) -> RunningJob | None:
        for cluster in self.clusters.values():
            found = cluster.running.get(job_id)
            if found is not None:
                return found
        return None


# ----------------------------------------------------------------------------- actions


@mypyc_attr(allow_interpreted_subclasses=True)  # a policy may yield its own (refused)
@dataclass(frozen=True, slots=True)
class Action:
    """Base of every decision a policy yields."""

    def __init__(self) -> None:
        pass


@dataclass(frozen=True, slots=True)
class Place(Action):
    """Start a waiting job on ``cluster`` with ``size`` nodes."""

    job_id: str
    cluster: str
    size: int

    def __init__(self, job_id: str, cluster: str, size: int) -> None:
        object.__setattr__(self, "job_id", job_id)
        object.__setattr__(self, "cluster", cluster)
        object.__setattr__(self, "size", size)


@dataclass(frozen=True, slots=True)
class Grow(Action):
    """Offer ``offer`` more nodes to a running malleable job (an answer follows)."""

    job_id: str
    offer: int

    def __init__(self, job_id: str, offer: int) -> None:
        object.__setattr__(self, "job_id", job_id)
        object.__setattr__(self, "offer", offer)


@dataclass(frozen=True, slots=True)
class Shrink(Action):
    """Ask a running malleable job to give back ``amount`` nodes.

    A mandatory shrink must be honoured (down to the job's minimum); a voluntary
    one is a request the job may turn down.
    """

    job_id: str
    amount: int
    mandatory: bool = False

    def __init__(self, job_id: str, amount: int, mandatory: bool = False) -> None:
        object.__setattr__(self, "job_id", job_id)
        object.__setattr__(self, "amount", amount)
        object.__setattr__(self, "mandatory", mandatory)


@dataclass(frozen=True, slots=True)
class Cancel(Action):
    """End a job (waiting or running)."""

    job_id: str
    reason: str = ""

    def __init__(self, job_id: str, reason: str = "") -> None:
        object.__setattr__(self, "job_id", job_id)
        object.__setattr__(self, "reason", reason)


@dataclass(frozen=True, slots=True)
class Defer(Action):
    """The policy tried to place a waiting job and could not: count a try."""

    job_id: str

    def __init__(self, job_id: str) -> None:
        object.__setattr__(self, "job_id", job_id)


@dataclass(frozen=True, slots=True)
class Reject(Action):
    """A waiting job can never be placed (it asks for more than any cluster has)."""

    job_id: str
    reason: str

    def __init__(self, job_id: str, reason: str) -> None:
        object.__setattr__(self, "job_id", job_id)
        object.__setattr__(self, "reason", reason)


@dataclass(frozen=True, slots=True)
class Cluster:
    """A cluster's static description (the DAS-3 sites, a testbed site...)."""

    name: str
    nodes: int
    reserve: int = 0
    speed: float = 1.0

    def __init__(self, name: str, nodes: int, reserve: int = 0, speed: float = 1.0) -> None:
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "nodes", nodes)
        object.__setattr__(self, "reserve", reserve)
        object.__setattr__(self, "speed", speed)
        self.__post_init__()

    def __post_init__(self) -> None:
        if self.nodes < 1:
            raise ValueError(f"cluster {self.name}: needs at least one node, not {self.nodes}")
        if not 0 <= self.reserve < self.nodes:
            raise ValueError(f"cluster {self.name}: reserve {self.reserve} outside [0, nodes)")


#: The five DAS-3 clusters of the KOALA paper (Table I), one node per allocation unit.
DAS3: tuple[Cluster, ...] = (
    Cluster("vu", 85),
    Cluster("uva", 41),
    Cluster("delft", 68),
    Cluster("multimedian", 46),
    Cluster("leiden", 32),
)


@dataclass(frozen=True, slots=True)
class Operation:
    """One malleability operation the manager performed (journal, records, activity plot)."""

    time: float
    kind: str  # "place", "grow", "shrink", "cancel", "reject"
    job_id: str
    cluster: str
    amount: int

    def __init__(self, time: float, kind: str, job_id: str, cluster: str, amount: int) -> None:
        object.__setattr__(self, "time", time)
        object.__setattr__(self, "kind", kind)
        object.__setattr__(self, "job_id", job_id)
        object.__setattr__(self, "cluster", cluster)
        object.__setattr__(self, "amount", amount)


@dataclass(frozen=True, slots=True)
class JobEvent:
    """Something that happened to a managed job, at ``time`` (seconds, manager clock).

    ``state`` is RUNNING for a start and for a resize (``size`` is the new size), a
    finished state for an end, or WAITING when the adapter gives the job back to the
    manager's queue (its submission never reached the resource manager). ``retriable``
    marks a failure that was not the job's fault (a node failed under it): the manager
    may submit it again (``Manager.max_retries``).

    ``answer`` is ``grow`` or ``shrink`` when the event answers an offer or a request the
    adapter answered :data:`~malleable.resources.PENDING`: ``amount`` is how many nodes
    the job took or gave back (0: refused, ``reason`` says why) and ``size`` its size
    after it. Defined here with the other values (compiled, see "construction" below);
    :mod:`malleable.resources`, the interface it belongs to, exports it too.
    """

    time: float
    job_id: str
    state: JobState
    size: int
    reason: str = ""
    retriable: bool = False
    answer: str = ""
    amount: int = 0

    def __init__(self, time: float, job_id: str, state: JobState, size: int, reason: str = "",
                 retriable: bool = False, answer: str = "", amount: int = 0) -> None:
        object.__setattr__(self, "time", time)
        object.__setattr__(self, "job_id", job_id)
        object.__setattr__(self, "state", state)
        object.__setattr__(self, "size", size)
        object.__setattr__(self, "reason", reason)
        object.__setattr__(self, "retriable", retriable)
        object.__setattr__(self, "answer", answer)
        object.__setattr__(self, "amount", amount)


# ----------------------------------------------------------------------------- construction
#
# Each value class above writes its own ``__init__`` (``tests/unit/test_model_init.py`` checks
# that it has the signature and the effect of the one dataclasses would generate). Compiled
# (setup.py), the classes are native and mypyc turns each ``object.__setattr__(self, "name",
# value)`` into a direct store. As plain Python, those calls are slower than quick_init's slot
# stores, so quick_init replaces the ``__init__``s; it is not a decorator because mypyc does
# not compile a class it cannot see through as a native class.
#
# Kept because its gain is measured (issue 35): ``benchmarks/bench_sim.py --quick --no-accasim
# --no-simpy --only fifo --only koala --compiled --repeat 3``, this tree and a copy without the
# three lines below, alternated twice on the shared 2-core machine (load 25): the source
# build's FIFO first fit (10,000 jobs) took 0.394 and 0.392 s of CPU with quick_init, 0.435
# and 0.430 s without (quick_init: about 9 % less CPU); with per-job output, 0.398 and
# 0.433 s against 0.458 and 0.520 s. The compiled build never applies it (0.223 and 0.227 s
# with, 0.233 and 0.245 s without: noise); every compiled row printed the same output as its
# source run.

VALUES: tuple[type, ...] = (JobSpec, RunningJob, ClusterView, WaitingJob, View, Action, Place,
                            Grow, Shrink, Cancel, Defer, Reject, Cluster, Operation, JobEvent)
"""The value classes whose ``__init__`` is written by hand."""


def _remake(cls: type[_T], values: dict[str, Any]) -> _T:
    return cls(**values)


def _reduce(value: object) -> tuple[Any, tuple[type, dict[str, Any]]]:
    """Pickle and copy a value through its ``__init__``: a native frozen dataclass cannot
    be restored field by field (its frozen ``__setattr__`` refuses)."""
    return _remake, (type(value), {f.name: getattr(value, f.name)
                                   for f in dataclasses.fields(value) if f.init})  # type: ignore[arg-type]


if isinstance(quick_init, FunctionType):  # plain Python, not the compiled module
    for _cls in VALUES:
        quick_init(_cls)
for _cls in VALUES:
    copyreg.pickle(_cls, _reduce)
