"""Energy of a run from the time each node spends idle or loaded (DMRlib paper, Appendix B).

The paper's figures for a MareNostrum IV node: 100 W idle, 340 W loaded ("100 Wh"
and "340 Wh" in the text, a power). Energy over a span ``T`` on ``N`` nodes whose
busy node-seconds are ``B`` is ``loaded * B + idle * (N * T - B)`` joules.
"""

from __future__ import annotations

from collections.abc import Sequence

IDLE_WATTS = 100.0
LOADED_WATTS = 340.0
JOULES_PER_KWH = 3.6e6


def busy_area(timeline: Sequence[tuple[float, int]], start: float, end: float) -> float:
    """Integral of busy nodes over [start, end] from a step function ``(time, busy)``."""
    area = 0.0
    for i, (t, busy) in enumerate(timeline):
        t_next = timeline[i + 1][0] if i + 1 < len(timeline) else end
        lo, hi = max(t, start), min(t_next, end)
        if hi > lo:
            area += busy * (hi - lo)
    return area


def energy_kwh(nodes: int, span: float, busy: float, idle_watts: float = IDLE_WATTS,
               loaded_watts: float = LOADED_WATTS) -> float:
    """Energy (kWh) of ``nodes`` over ``span`` seconds with ``busy`` busy node-seconds."""
    if nodes < 1 or span < 0 or busy < 0 or busy > nodes * span * (1 + 1e-9):
        raise ValueError(f"inconsistent figures: {nodes} nodes, span {span} s, busy {busy}")
    idle = max(0.0, nodes * span - busy)
    return (loaded_watts * busy + idle_watts * idle) / JOULES_PER_KWH


def allocation_rate(nodes: int, span: float, busy: float) -> float:
    """Fraction of the node-time that was allocated to jobs."""
    return busy / (nodes * span) if span > 0 else 0.0
