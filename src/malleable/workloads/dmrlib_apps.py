"""The four applications of the DMRlib study (Iserte et al., sections 4.3 and 5.2-5.3).

Each application is a table of execution times relative to its reference run (one
process, three for HPG-aligner), at the sizes the paper's strong-scaling test used
(doubling from the reference). Between tabulated sizes the time is interpolated
linearly in ``log2(n)``; above the last size it stays flat; below the reference it
grows as ``1/n`` (perfect scaling down, never used by the study's limits).

The paper publishes only the limits derived from Fig. 3 (Table 5), not the measured
times, so the tables below (kept as data in :data:`malleable.apps.DMRLIB`, where every
world finds the curves) are ours: chosen so that the paper's own rule
(:func:`malleability_parameters`: the gain difference
``s(n) = (t(prev) - t(n)) / t(ref) * 100`` against a 10% threshold) gives back
Table 5 exactly, and so that they read as section 5.3 describes them:

====== ==== ==== ==== ==== ==== ==== ===== =========================================
app    ref  x1   x2   x4   x8   x16  x32   shape
====== ==== ==== ==== ==== ==== ==== ===== =========================================
CG     1    1.00 .60  .40  .26  .15  .12   scales to 16 (gains 40, 20, 14, 11, 3 %)
Jacobi 1    1.00 .75  .60  .55  .52  .50   scales to about 4 (25, 15, 5, 3, 2 %)
N-body 1    1.00 .95  .91  .88  .86  .85   hardly scales (5, 4, 3, 2, 1 %)
HPG    3    1.00 .80  .75  .78  --   --    I/O bound: 6 best, 12 max, 24 slower
====== ==== ==== ==== ==== ==== ==== ===== =========================================

(HPG-aligner's columns are 3, 6, 12 and 24 processes.) The absolute times at the
reference size (``base_time``) are ours too; the paper sizes its runs by iterations
(Table 4) and does not give seconds. Reconfiguration points: CG and Jacobi iterate
fast and use DMRlib's scheduling-period inhibitor of 10 s (Table 5); N-body checks
once per iteration (50 iterations, Table 4) and HPG-aligner once per iteration
(``4 x workers`` iterations, workers = initial size - 2 reader/writer processes).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass

from malleable.apps import DMRLIB, Tabulated
from malleable.model import JobSpec

THRESHOLD = 10.0
"""The gain-difference threshold of section 5.3, in percent."""


@dataclass(frozen=True)
class App:
    """One application of the study: its scalability table and malleability parameters."""

    label: str
    model: str
    lower: int
    upper: int
    preferred: int
    curve: Tabulated
    period: float | None = None
    iterations: int | None = None

    @property
    def base_time(self) -> float:
        return self.curve.base_time

    @property
    def table(self) -> tuple[tuple[int, float], ...]:
        return self.curve.table

    @property
    def reference(self) -> int:
        return self.table[0][0]

    def time(self, n: int) -> float:
        """Execution time (s) of the whole job on ``n`` nodes (its application model)."""
        return self.curve(n)

    def reconfig_interval(self, spec: JobSpec, size: int) -> float:
        """Seconds between two reconfiguration points of a job of this app at ``size``."""
        if self.period is not None:
            return self.period
        iterations = self.iterations
        if iterations is None:  # HPG-aligner: 4 iterations per worker of the first run
            iterations = 4 * max(1, spec.initial_size - 2)
        return self.time(size) / iterations


def gain_differences(table: Sequence[tuple[int, float]]) -> list[tuple[int, float]]:
    """Section 5.3's gain difference ``(t(prev) - t(n)) / t(ref) * 100`` at each tabulated n."""
    ref = table[0][1]
    return [(n1, (t0 - t1) / ref * 100.0) for (_, t0), (n1, t1) in itertools.pairwise(table)]


def malleability_parameters(table: Sequence[tuple[int, float]], cap: int,
                            threshold: float = THRESHOLD) -> tuple[int, int, int]:
    """(lower, upper, preferred) by the paper's rule, sizes capped at ``cap`` nodes.

    Lower: the first size whose gain exceeds the threshold (the reference size when
    none does). Preferred: the last size before the gain drops below the threshold
    (the reference when it never reaches it). Upper: the last size before the gain
    drops below zero.
    """
    gains = [(n, s) for n, s in gain_differences(table) if n <= cap]
    ref = table[0][0]
    above = [n for n, s in gains if s > threshold]
    lower = above[0] if above else ref
    preferred = ref
    for n, s in gains:
        if s < threshold:
            break
        preferred = n
    upper = ref
    for n, s in gains:
        if s < 0:
            break
        upper = n
    return lower, upper, preferred


CG = App("CG", "dmr-cg", 2, 32, 16, DMRLIB["dmr-cg"], period=10.0)
JACOBI = App("Jacobi", "dmr-jacobi", 2, 32, 4, DMRLIB["dmr-jacobi"], period=10.0)
NBODY = App("N-body", "dmr-nbody", 1, 32, 1, DMRLIB["dmr-nbody"], iterations=50)
HPG = App("HPG-aligner", "dmr-hpg", 6, 12, 6, DMRLIB["dmr-hpg"])

#: The study's applications, in the paper's order.
APPS: tuple[App, ...] = (CG, JACOBI, NBODY, HPG)
BY_MODEL: dict[str, App] = {app.model: app for app in APPS}
BY_LABEL: dict[str, App] = {app.label.lower(): app for app in APPS}

NODES = 128
"""Compute nodes of the study's cluster (MareNostrum IV partition)."""
CAP = 32
"""No job may ask for more than a quarter of the cluster."""


def app_named(name: str) -> App:
    """An application by label: cg, jacobi, n-body (nbody), hpg-aligner (hpg)."""
    key = name.lower()
    aliases = {"nbody": "n-body", "hpg": "hpg-aligner"}
    app = BY_LABEL.get(aliases.get(key, key)) or BY_MODEL.get(key)
    if app is None:
        valid = ", ".join(a.label.lower() for a in APPS)
        raise ValueError(f"unknown application {name!r}; valid: {valid}")
    return app
