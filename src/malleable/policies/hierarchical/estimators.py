"""Job-level desire estimators: A-Control (AC) and A-Greedy (AG).

Both run once per job-level quantum (length ``L``) and compute the job's processor
desire for the next quantum from what happened in this one. They are plain
functions over numpy arrays (a scalar works too), so the quantum simulator
updates every job at once and the real-site policy updates one.

* **A-Control** (section 3.1, eq. 1, with the convergence rate set to zero as the
  paper does): the next desire is the job's average parallelism over the quantum,
  ``A(q) = w(q) / l(q)`` (work done over span reduced). A job that made no progress
  (``l(q) = 0``) keeps its desire. A new job desires 1.
* **A-Greedy** (Agrawal, He, Hsu and Leiserson, PPoPP 2006): a quantum is
  *efficient* when the job used at least ``utilization`` (delta) of the processor
  time it was allotted, and *satisfied* when it got at least its desire. Inefficient:
  divide the desire by ``responsiveness`` (rho); efficient and satisfied: multiply
  by rho; efficient and deprived: keep it. A new job desires 1. We keep desires at
  or above 1 (a job with work left needs a processor).
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from malleable.policies.hierarchical.deq import TOLERANCE

FloatArray = NDArray[np.float64]

#: The desire of a job in its first quantum, for both estimators.
INITIAL_DESIRE = 1.0


class Estimator(enum.Enum):
    """How a job's processor desire is computed each quantum."""

    AC = "ac"
    """A-Control: the average parallelism measured in the last quantum."""
    AG = "ag"
    """A-Greedy: multiplicative increase/decrease driven by utilization."""


@dataclass(frozen=True, slots=True)
class AGreedyParams:
    """A-Greedy's two parameters (Agrawal et al. use delta = 0.8, rho = 2)."""

    utilization: float = 0.8
    responsiveness: float = 2.0

    def __post_init__(self) -> None:
        if not 0.0 < self.utilization <= 1.0:
            raise ValueError(f"A-Greedy utilization {self.utilization} must be in (0, 1]")
        if not self.responsiveness > 1.0:
            raise ValueError(f"A-Greedy responsiveness {self.responsiveness} must be above 1")


def a_control(work: FloatArray, span: FloatArray, desire: FloatArray) -> FloatArray:
    """AC's next desire: ``work / span`` where the job progressed, else its desire."""
    work = np.asarray(work, dtype=np.float64)
    span = np.asarray(span, dtype=np.float64)
    progressed = span > 0
    safe = np.where(progressed, span, 1.0)
    return np.where(progressed, work / safe, np.asarray(desire, dtype=np.float64))


def a_greedy(desire: FloatArray, allotted: FloatArray, work: FloatArray, time: FloatArray,
             params: AGreedyParams = AGreedyParams()) -> FloatArray:
    """AG's next desire.

    ``allotted`` is the number of processors the job had during the quantum, ``time``
    how long it held them in the quantum (``L``, or less in its last one) and ``work``
    the work it did then. Jobs that held nothing (``time * allotted == 0``) keep their
    desire.
    """
    desire = np.asarray(desire, dtype=np.float64)
    allotted = np.asarray(allotted, dtype=np.float64)
    capacity = allotted * np.asarray(time, dtype=np.float64)
    efficient = np.asarray(work, dtype=np.float64) >= params.utilization * capacity * (
        1 - TOLERANCE)
    satisfied = allotted >= desire * (1 - TOLERANCE)
    rho = params.responsiveness
    nxt = np.where(~efficient, desire / rho, np.where(satisfied, desire * rho, desire))
    nxt = np.where(capacity > 0, nxt, desire)
    return np.maximum(nxt, INITIAL_DESIRE)
