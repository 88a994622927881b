"""How a managed job's sleep-based work is scaled on a real site, whatever its kind: the
checks of a payload's knobs, its run time at each size and a generous time limit. The
Slurm payload (``adapters/slurm/payload.py``) and the OAR payload
(``adapters/oar/payload.py``) both use these, so that a job takes the same time on both.
"""

from __future__ import annotations

from collections.abc import Mapping

from malleable.apps import AppCatalog
from malleable.model import JobSpec


def check(time_scale: float, speed: float, tick: float, finish_file: str | None) -> None:
    """ValueError for a payload knob that is not positive, or a relative ``finish_file``."""
    for name, value in (("time_scale", time_scale), ("speed", speed), ("tick", tick)):
        if not value > 0:
            raise ValueError(f"payload {name} must be positive, not {value!r}")
    if finish_file is not None and not finish_file.startswith("/"):
        raise ValueError(f"payload finish_file must be an absolute path, not {finish_file!r}")


def times(catalog: AppCatalog, spec: JobSpec, time_scale: float, speed: float
          ) -> dict[int, float]:
    """Real seconds the whole job takes at each size in [min, max]: its application
    model's time, ``time_scale`` real seconds per model second, on nodes of ``speed``."""
    curve = catalog.time_model(spec)
    return {n: curve(n) * time_scale / speed for n in range(spec.min_size, spec.max_size + 1)}


def time_limit_minutes(seconds: Mapping[int, float]) -> int:
    """A generous time limit for a job of these :func:`times`: three times its longest run
    (at the minimum size), at least 5 minutes."""
    longest = max(seconds.values())
    return max(5, int(3 * longest / 60) + 1)
