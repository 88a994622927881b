"""Application models: how long a job takes at a given size, as one :class:`AppCatalog`.

A model maps a job to ``time(n)``: the execution time, in seconds, of the whole job
on ``n`` nodes of a cluster of speed 1. A job's progress rate at size ``n`` is
``1 / time(n)`` of its work per second, so work done is preserved across resizes.

The KOALA paper's applications (section VI-A, Fig. 6), as Amdahl curves
``T(n) = serial + parallel / n`` fitted to the figures the paper gives:

* **ft** (NAS Parallel Benchmark FT): about 120 s on 2 processors, about 60 s at
  best: ``T(n) = 60 + 120 / n`` (120 s at 2, 63.8 s at 32). Runs only on powers
  of two, so it accepts the largest power of two that fits an offer.
* **gadget2** (GADGET-2 n-body): about 600 s on 2 processors, about 240 s at best:
  ``T(n) = 240 + 720 / n`` (600 s at 2, 255.7 s at 46). Any size.

The DMRlib study's applications (**dmr-cg**, **dmr-jacobi**, **dmr-nbody**,
**dmr-hpg**) are tables of relative times (:class:`Tabulated`); how the tables were
chosen, and the study's malleability parameters, are in
:mod:`malleable.workloads.dmrlib_apps`. Their curves live here, as data, so that
every world knows them whatever was imported first.

Generic models: **fixed** (``runtime`` seconds whatever the size: a rigid job or a
trace job), and **amdahl:S** (serial fraction ``S``; ``runtime`` is the time at the
job's initial size).

Third-party models come from the ``malleable.apps`` entry-point group: each entry
point names an :class:`AppModel` (or a bare ``time(n)`` callable, size rule ANY). A
plug-in that fails to load is logged and skipped. :func:`standard_catalog` is the
built-ins plus the plug-ins, built once; pass a catalog where a different one is
wanted (tests, studies).
"""

from __future__ import annotations

import functools
import itertools
import logging
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING

from malleable.model import JobSpec, SizeRule

if TYPE_CHECKING:
    from importlib.metadata import EntryPoint

logger = logging.getLogger(__name__)

GROUP = "malleable.apps"
"""The entry-point group of third-party application models."""

TimeModel = Callable[[int], float]


def ft_time(n: int) -> float:
    return 60.0 + 120.0 / n


def gadget2_time(n: int) -> float:
    return 240.0 + 720.0 / n


@dataclass(frozen=True)
class UShaped:
    """``T(n) = a + b/n + c*n``: a speedup curve whose minimum lies at ``optimum``.

    Fitted through two end points, ``T(low) = t_low`` and ``T(high) = t_high``, with
    ``T'(optimum) = 0`` (so ``b = c * optimum**2``). KOALA's Fig. 6 gives the end points
    of FT and GADGET-2; the size of the optimum is not in the paper, so it is a model
    option (:class:`malleable.sim.model_options.ModelOptions`), not a claim. The
    minimum lies strictly inside (low, high) only when ``optimum**2 > low * high``.
    """

    low: int
    t_low: float
    high: int
    t_high: float
    optimum: int

    def __post_init__(self) -> None:
        if not self.low < self.optimum < self.high:
            raise ValueError(f"the optimum size {self.optimum} must lie strictly between "
                             f"{self.low} and {self.high}")
        if self.optimum ** 2 <= self.low * self.high:
            raise ValueError(f"optimum {self.optimum} is too small: a + b/n + c*n through "
                             f"T({self.low}) > T({self.high}) has its minimum above "
                             f"sqrt({self.low}*{self.high}) = "
                             f"{(self.low * self.high) ** 0.5:.1f}")

    @property
    def coefficients(self) -> tuple[float, float, float]:
        """``(a, b, c)``."""
        lo, hi, opt = self.low, self.high, self.optimum
        c = (self.t_low - self.t_high) / ((hi - lo) * (opt * opt / (lo * hi) - 1.0))
        b = c * opt * opt
        a = self.t_low - b / lo - c * lo
        return a, b, c

    def __call__(self, n: int) -> float:
        a, b, c = self.coefficients
        return a + b / n + c * n


def relative_time(table: Sequence[tuple[int, float]], n: int) -> float:
    """A table's relative time at ``n``: log-linear between points, flat above the
    last, ``1/n`` below the first."""
    if n < 1:
        raise ValueError(f"size {n} is below 1")
    first_size, first_time = table[0]
    if n <= first_size:
        return first_time * first_size / n
    x = math.log2(n)
    for (n0, t0), (n1, t1) in itertools.pairwise(table):
        if n <= n1:
            x0, x1 = math.log2(n0), math.log2(n1)
            return t0 + (t1 - t0) * (x - x0) / (x1 - x0)
    return table[-1][1]


@dataclass(frozen=True)
class Tabulated:
    """``time(n) = base_time * relative_time(table, n)``: a measured scaling table."""

    base_time: float
    table: tuple[tuple[int, float], ...]

    def __call__(self, n: int) -> float:
        return self.base_time * relative_time(self.table, n)


@dataclass(frozen=True)
class AppModel:
    """A named application: its time curve and the sizes it accepts."""

    curve: TimeModel
    rule: SizeRule = SizeRule.ANY


#: The DMRlib study's curves (see :mod:`malleable.workloads.dmrlib_apps`).
DMRLIB: Mapping[str, Tabulated] = MappingProxyType({
    "dmr-cg": Tabulated(1500.0, ((1, 1.00), (2, 0.60), (4, 0.40), (8, 0.26), (16, 0.15),
                                 (32, 0.12))),
    "dmr-jacobi": Tabulated(600.0, ((1, 1.00), (2, 0.75), (4, 0.60), (8, 0.55), (16, 0.52),
                                    (32, 0.50))),
    "dmr-nbody": Tabulated(400.0, ((1, 1.00), (2, 0.95), (4, 0.91), (8, 0.88), (16, 0.86),
                                   (32, 0.85))),
    "dmr-hpg": Tabulated(900.0, ((3, 1.00), (6, 0.80), (12, 0.75), (24, 0.78))),
})

#: Named models shipped with the package, in the order error messages list them.
BUILTIN: Mapping[str, AppModel] = MappingProxyType({
    "ft": AppModel(ft_time, SizeRule.POW2),
    "gadget2": AppModel(gadget2_time),
    **{name: AppModel(curve) for name, curve in DMRLIB.items()},
})


def _fixed(spec: JobSpec) -> TimeModel:
    runtime = spec.runtime if spec.runtime is not None else 0.0
    return lambda n: runtime


def _amdahl(spec: JobSpec, serial: float) -> TimeModel:
    base = spec.runtime if spec.runtime is not None else 0.0
    at_initial = serial + (1.0 - serial) / spec.initial_size
    return lambda n: base * (serial + (1.0 - serial) / n) / at_initial


def _serial_fraction(app: str) -> float | None:
    """``S`` of ``amdahl:S`` when it is a number in [0, 1], else None."""
    if not app.startswith("amdahl:"):
        return None
    try:
        serial = float(app.split(":", 1)[1])
    except ValueError:
        return None
    return serial if 0.0 <= serial <= 1.0 else None


def _generic(app: str) -> bool:
    return app == "fixed" or app.startswith("amdahl:")


@dataclass(frozen=True)
class AppCatalog:
    """Named application models plus the generic ``fixed`` and ``amdahl:S``.

    ``more`` supplies further models the first time a name is not among ``models``
    (the standard catalog's plug-ins: so a run that names only built-in applications
    never reads the installed packages' entry points); ``models`` win over them.
    """

    models: Mapping[str, AppModel]
    more: Callable[[], Mapping[str, AppModel]] | None = field(default=None, compare=False)
    # ``more``'s models, once read (None: not yet); set here, as a field, so that the
    # compiled build (setup.py) can make this a native class, which has no __dict__.
    _loaded: Mapping[str, AppModel] | None = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        for name in self.models:
            if _generic(name):
                raise ValueError(f"application name {name!r} is reserved")
        object.__setattr__(self, "models", MappingProxyType(dict(self.models)))
        object.__setattr__(self, "_loaded", None)

    def _model(self, app: str) -> AppModel | None:
        model = self.models.get(app)
        if model is None and self.more is not None:
            model = self._more().get(app)
        return model

    def _more(self) -> Mapping[str, AppModel]:
        loaded = self._loaded
        if loaded is None:
            found = self.more() if self.more is not None else {}
            loaded = MappingProxyType({k: v for k, v in found.items() if k not in self.models})
            object.__setattr__(self, "_loaded", loaded)
        return loaded

    def known(self, app: str) -> bool:
        """Whether ``app`` names a model (``fixed``, ``amdahl:S`` or a named curve)."""
        return (app == "fixed" or _serial_fraction(app) is not None
                or self._model(app) is not None)

    def problem(self, app: str) -> str:
        """Why ``app`` names no model ("" when it does): ``amdahl:S`` with ``S`` outside
        [0, 1] or not a number, or an unknown name (with the valid ones)."""
        if self.known(app):
            return ""
        if app.startswith("amdahl:"):
            return (f"application {app!r}: the serial fraction must be in [0, 1] "
                    "(amdahl:S, e.g. amdahl:0.1)")
        return f"unknown application {app!r}; valid: {', '.join(self.names())}"

    def rule(self, app: str) -> SizeRule:
        """The size rule ``app`` declares (ANY for generic or unknown models)."""
        if _generic(app):
            return SizeRule.ANY
        model = self._model(app)
        return model.rule if model is not None else SizeRule.ANY

    def names(self) -> list[str]:
        """The valid application names, generic ones first."""
        return ["fixed", "amdahl:S", *self.models, *self._more()]

    def time_model(self, spec: JobSpec) -> TimeModel:
        """The execution-time curve of ``spec``; ValueError for an unknown application."""
        model = self.models.get(spec.app)
        if model is not None:
            return model.curve
        if self.more is not None and not _generic(spec.app):
            model = self._more().get(spec.app)
            if model is not None:
                return model.curve
        if spec.app == "fixed":
            return _fixed(spec)
        serial = _serial_fraction(spec.app)
        if serial is not None:
            return _amdahl(spec, serial)
        raise ValueError(f"unknown application {spec.app!r}; valid: {', '.join(self.names())}")

    def with_models(self, models: Mapping[str, AppModel]) -> AppCatalog:
        """This catalog plus ``models`` (which win over same-named ones)."""
        return AppCatalog({**self.models, **models}, self.more)


def _as_model(name: str, loaded: object) -> AppModel:
    if isinstance(loaded, AppModel):
        return loaded
    if callable(loaded):
        return AppModel(loaded)
    raise TypeError(f"{name} is neither an AppModel nor a callable time(n)")


def plugins(points: Iterable[EntryPoint] | None = None) -> dict[str, AppModel]:
    """Third-party models of the ``malleable.apps`` group that load (broken ones skipped),
    from ``points`` (default: the installed entry points of the group)."""
    found: dict[str, AppModel] = {}
    for ep in entry_points(group=GROUP) if points is None else points:
        if ep.name in BUILTIN or _generic(ep.name):
            logger.warning("application plug-in %s (%s) skipped: the name is taken",
                           ep.name, ep.value)
            continue
        try:
            found[ep.name] = _as_model(ep.name, ep.load())
        except Exception as exc:  # a broken plug-in must not break the others
            logger.warning("application plug-in %s (%s) failed to load: %s",
                           ep.name, ep.value, exc)
    return found


def entry_points(group: str) -> Iterable[EntryPoint]:
    """The installed entry points of ``group`` (:mod:`importlib.metadata` is imported only
    here: it costs a simulation that names built-in applications only ~60 M instructions)."""
    from importlib.metadata import entry_points as installed

    return installed(group=group)


@functools.cache
def standard_catalog() -> AppCatalog:
    """The built-in models, then every plug-in that loads, read at the first name that is
    not built in (built once)."""
    return AppCatalog(BUILTIN, plugins)
