"""The seven parallelism curves of section 4.1 (Fig. 2) and their discretisation.

A phase has length ``T`` in span (critical-path) units and average parallelism
``A``. An *increasing* curve is ``h(x) = 1 + (peak - 1) * f(x)`` over ``x`` in [0, 1]
(the fraction of the phase done), where ``f`` rises from 0 to 1 with the curve's
shape, and ``peak`` is chosen so that the mean of ``h`` is exactly ``A``: every
curve keeps the Step phase's length, work (``A * T``) and average parallelism. A
*decreasing* curve is the mirror image. Starting from one thread matches Fig. 3,
where parallelism grows by spawning from a single thread.

The shapes, ordered from the earliest to the latest rise (``F`` is the mean of f):

==========  ==============================  ======
curve       f(x)                            F
==========  ==============================  ======
Step        1 (flat at A)                   1
Log         ln(1 + 50x) / ln 51             0.766
Poly(II)    sqrt(x)                         2/3
Ramp        x                               1/2
Poly(I)     x^2                             1/3
Exp         (e^(5x) - 1) / (e^5 - 1)        0.193
Impulse     1 on the last tenth, else 0     0.1
==========  ==============================  ======

The paper gives no formulas for the curves (Fig. 2 is a drawing); these are our
choice within its rules (same length, work and average parallelism). A phase is
stored as ``segments`` pieces of equal span whose heights are the exact means of
``h`` over each piece, so the work is preserved exactly.
"""

from __future__ import annotations

import enum
import math

import numpy as np
from numpy.typing import NDArray

FloatArray = NDArray[np.float64]

_LOG_K = 50.0
_EXP_K = 5.0
_IMPULSE_WIDTH = 0.1


class Profile(enum.Enum):
    """A parallelism variation curve (Fig. 2)."""

    STEP = "step"
    LOG = "log"
    POLY2 = "poly2"
    RAMP = "ramp"
    POLY1 = "poly1"
    EXP = "exp"
    IMPULSE = "impulse"

    def primitive(self, x: FloatArray) -> FloatArray:
        """``integral_0^x f(u) du`` for the curve's shape ``f``."""
        x = np.asarray(x, dtype=np.float64)
        match self:
            case Profile.STEP:
                return x
            case Profile.LOG:
                k = _LOG_K
                return ((1 + k * x) * np.log1p(k * x) - k * x) / (k * math.log1p(k))
            case Profile.POLY2:
                return (2.0 / 3.0) * x ** 1.5
            case Profile.RAMP:
                return x ** 2 / 2
            case Profile.POLY1:
                return x ** 3 / 3
            case Profile.EXP:
                k = _EXP_K
                return ((np.exp(k * x) - 1) / k - x) / math.expm1(k)
            case Profile.IMPULSE:
                return np.maximum(0.0, x - (1 - _IMPULSE_WIDTH))
        raise AssertionError(self)  # pragma: no cover - every member is matched

    @property
    def mean_shape(self) -> float:
        """F: the mean of ``f`` over the phase."""
        return float(self.primitive(np.array(1.0)))

    def shape(self, x: FloatArray) -> FloatArray:
        """``f(x)`` itself (for plots)."""
        x = np.asarray(x, dtype=np.float64)
        match self:
            case Profile.STEP:
                return np.ones_like(x)
            case Profile.LOG:
                return np.log1p(_LOG_K * x) / math.log1p(_LOG_K)
            case Profile.POLY2:
                return np.sqrt(x)
            case Profile.RAMP:
                return x
            case Profile.POLY1:
                return x ** 2
            case Profile.EXP:
                return np.expm1(_EXP_K * x) / math.expm1(_EXP_K)
            case Profile.IMPULSE:
                return (x >= 1 - _IMPULSE_WIDTH).astype(np.float64)
        raise AssertionError(self)  # pragma: no cover


PROFILES: tuple[Profile, ...] = tuple(Profile)


def peak(profile: Profile, average: float) -> float:
    """Highest parallelism of the curve whose mean is ``average`` (starting from 1)."""
    return 1.0 + (average - 1.0) / profile.mean_shape


def phase_heights(profile: Profile, average: float, increasing: bool,
                  segments: int = 10) -> FloatArray:
    """Mean parallelism of each of ``segments`` equal pieces of one phase."""
    if average < 1:
        raise ValueError(f"average parallelism {average} must be at least 1")
    edges = np.linspace(0.0, 1.0, segments + 1)
    area = np.diff(profile.primitive(edges)) * segments  # mean of f on each piece
    heights = 1.0 + (peak(profile, average) - 1.0) * area
    return heights if increasing else heights[::-1].copy()


def curve(profile: Profile, average: float, increasing: bool, x: FloatArray) -> FloatArray:
    """The continuous curve ``h`` at phase fractions ``x`` (for plots and tests)."""
    f = profile.shape(x if increasing else 1.0 - np.asarray(x))
    return 1.0 + (peak(profile, average) - 1.0) * f
