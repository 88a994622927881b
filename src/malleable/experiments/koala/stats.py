"""Per-run figures of the KOALA experiment (one number per run, averaged over seeds).

Sizes are counted over the malleable jobs only (rigid jobs of Wmr are size 2 by
definition); times over all jobs unless the name says otherwise. "Stuck" means a
malleable job whose size never went above its initial size of 2.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Sequence

from malleable.experiments.koala.runs import JobRow, Run

Metric = Callable[[Run], float]
INITIAL_SIZE = 2


def _mean(values: Sequence[float]) -> float:
    finite = [v for v in values if not math.isnan(v)]
    return statistics.fmean(finite) if finite else math.nan


def _median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else math.nan


def _fraction(rows: Sequence[JobRow], test: Callable[[JobRow], bool]) -> float:
    return sum(1 for r in rows if test(r)) / len(rows) if rows else math.nan


def mall_avg_size(run: Run) -> float:
    return _mean([j.avg_size for j in run.malleable()])


def mall_max_size(run: Run) -> float:
    return _mean([float(j.max_size) for j in run.malleable()])


def stuck(run: Run) -> float:
    return _fraction(run.malleable(), lambda j: j.max_size <= INITIAL_SIZE)


def ft_stuck(run: Run) -> float:
    return _fraction([j for j in run.malleable() if j.app == "ft"],
                     lambda j: j.max_size <= INITIAL_SIZE)


def mean_exec(run: Run) -> float:
    return _mean([j.execution for j in run.jobs])


def mean_resp(run: Run) -> float:
    return _mean([j.response for j in run.jobs])


def mean_wait(run: Run) -> float:
    return _mean([j.wait for j in run.jobs])


def mall_resp(run: Run) -> float:
    return _mean([j.response for j in run.malleable()])


def util(run: Run) -> float:
    return float(run.summary["utilization"])


def grows(run: Run) -> float:
    return float(len(run.grows))


def shrinks(run: Run) -> float:
    return float(len(run.shrinks))


def gadget_exec_median(run: Run) -> float:
    return _median([j.execution for j in run.jobs if j.app == "gadget2"])


def ft_exec_median(run: Run) -> float:
    return _median([j.execution for j in run.jobs if j.app == "ft"])


def ft_fast(run: Run) -> float:
    """Fraction of FT jobs that executed in under 200 s."""
    return _fraction([j for j in run.jobs if j.app == "ft"], lambda j: j.execution < 200)


def gadget_slow(run: Run) -> float:
    """Fraction of GADGET-2 jobs that executed in over 400 s."""
    return _fraction([j for j in run.jobs if j.app == "gadget2"], lambda j: j.execution > 400)


def shared(run: Run) -> float:
    """Fraction of malleable jobs that ran beside another malleable job on their cluster."""
    return _fraction(run.malleable(), lambda j: j.shared)


def late_resizes(run: Run) -> float:
    """Share of all grow/shrink operations that fall in the last third of the submissions."""
    ops = run.grows + run.shrinks
    if not ops:
        return 0.0
    cut = run.last_submit * 2 / 3
    return sum(1 for t in ops if cut <= t <= run.last_submit) / len(ops)


#: name -> (metric, unit/format, description), for tables and --json.
METRICS: dict[str, tuple[Metric, str, str]] = {
    "mall_avg_size": (mall_avg_size, ".1f", "mean time-averaged size of malleable jobs"),
    "mall_max_size": (mall_max_size, ".1f", "mean maximum size of malleable jobs"),
    "stuck": (stuck, ".0%", "malleable jobs that never grew beyond 2"),
    "ft_stuck": (ft_stuck, ".0%", "malleable FT jobs that never grew beyond 2"),
    "mean_exec": (mean_exec, ".0f", "mean execution time (s)"),
    "mean_resp": (mean_resp, ".0f", "mean response time (s)"),
    "mean_wait": (mean_wait, ".1f", "mean wait time (s)"),
    "util": (util, ".1%", "utilization (busy node-seconds / capacity, to the last end)"),
    "grows": (grows, ".0f", "grow operations"),
    "shrinks": (shrinks, ".0f", "shrink operations"),
    "gadget_exec_median": (gadget_exec_median, ".0f", "median GADGET-2 execution time (s)"),
    "ft_exec_median": (ft_exec_median, ".0f", "median FT execution time (s)"),
    "shared": (shared, ".0%", "malleable jobs that shared their cluster with another"),
}


def per_seed(runs: Sequence[Run], metric: Metric) -> list[float]:
    return [metric(r) for r in runs]


def mean_over(runs: Sequence[Run], metric: Metric) -> float:
    return _mean(per_seed(runs, metric))


def fmt(value: float, spec: str) -> str:
    return "n/a" if math.isnan(value) else format(value, spec)
