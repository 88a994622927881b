"""Application models: how long a job takes at a given size.

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

Generic models: **fixed** (``runtime`` seconds whatever the size: a rigid job or a
trace job), and **amdahl:S** (serial fraction ``S``; ``runtime`` is the time at the
job's initial size).
"""

from __future__ import annotations

from collections.abc import Callable

from malleable.model import JobSpec, SizeRule

TimeModel = Callable[[int], float]


def ft_time(n: int) -> float:
    return 60.0 + 120.0 / n


def gadget2_time(n: int) -> float:
    return 240.0 + 720.0 / n


def _fixed(spec: JobSpec) -> TimeModel:
    runtime = spec.runtime if spec.runtime is not None else 0.0
    return lambda n: runtime


def _amdahl(spec: JobSpec, serial: float) -> TimeModel:
    base = spec.runtime if spec.runtime is not None else 0.0
    at_initial = serial + (1.0 - serial) / spec.initial_size
    return lambda n: base * (serial + (1.0 - serial) / n) / at_initial


#: Named models whose time does not depend on the job's own fields.
CURVES: dict[str, TimeModel] = {"ft": ft_time, "gadget2": gadget2_time}

#: The size rule each named application declares.
RULES: dict[str, SizeRule] = {"ft": SizeRule.POW2}


def register_curve(name: str, curve: TimeModel, rule: SizeRule = SizeRule.ANY) -> None:
    """Add a named application (used by the DMRlib study's CG, Jacobi, N-body...)."""
    CURVES[name] = curve
    RULES[name] = rule


def known(app: str) -> bool:
    """Whether ``app`` names a model (``fixed``, ``amdahl:S`` or a named curve)."""
    if app in CURVES or app == "fixed":
        return True
    if app.startswith("amdahl:"):
        try:
            serial = float(app.split(":", 1)[1])
        except ValueError:
            return False
        return 0.0 <= serial <= 1.0
    return False


def time_model(spec: JobSpec) -> TimeModel:
    """The execution-time curve of ``spec``; ValueError for an unknown application."""
    curve = CURVES.get(spec.app)
    if curve is not None:
        return curve
    if spec.app == "fixed":
        return _fixed(spec)
    if spec.app.startswith("amdahl:") and known(spec.app):
        return _amdahl(spec, float(spec.app.split(":", 1)[1]))
    valid = ", ".join(["fixed", "amdahl:S", *CURVES])
    raise ValueError(f"unknown application {spec.app!r}; valid: {valid}")
