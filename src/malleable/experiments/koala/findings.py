"""The paper's findings (sections VII-A, VII-B and the conclusion), checked on our runs.

Each finding states what the paper says, how we test it, and evaluates to an
:class:`Outcome`: our numbers (means over seeds) and a verdict. A comparison is
made seed by seed (the same workload under both settings): "holds" when it holds
for every seed, "does not hold" when for none, "partly (k/n seeds)" otherwise.
Where the paper is vague ("relatively few", "many", "much higher", "far worse"),
the threshold we use is written in the test: ours, read from the paper's wording,
not adjusted to our results.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from malleable.experiments.koala import stats as st
from malleable.experiments.koala.runs import FIG7, FIG8, Combo, Results, baseline_of

PRA_FPSMA_WM, PRA_EGS_WM, PRA_FPSMA_WMR, PRA_EGS_WMR = FIG7
PWA_FPSMA_WM, PWA_EGS_WM, PWA_FPSMA_WMR, PWA_EGS_WMR = FIG8


@dataclass(frozen=True)
class Outcome:
    verdict: str
    numbers: str
    values: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class Finding:
    key: str
    section: str
    claim: str
    test: str
    evaluate: Callable[[Context], Outcome]


@dataclass(frozen=True)
class Context:
    results: Results
    variant: str

    def values(self, combo: Combo, metric: st.Metric) -> list[float]:
        return st.per_seed(self.results.of(combo, self.variant), metric)

    def mean(self, combo: Combo, metric: st.Metric) -> float:
        return st.mean_over(self.results.of(combo, self.variant), metric)


def verdict(flags: Sequence[bool]) -> str:
    if flags and all(flags):
        return "holds"
    if not any(flags):
        return "does not hold"
    return f"partly ({sum(flags)}/{len(flags)})"


def _pairs(ctx: Context, metric: st.Metric, pairs: Sequence[tuple[Combo, Combo]],
           relation: Callable[[float, float], bool], spec: str) -> Outcome:
    """``relation(a, b)`` per seed for every (a, b) pair; numbers are the means."""
    flags: list[bool] = []
    parts: list[str] = []
    values: dict[str, float] = {}
    identical = True
    for a, b in pairs:
        va, vb = ctx.values(a, metric), ctx.values(b, metric)
        flags += [relation(x, y) for x, y in zip(va, vb, strict=True)]
        identical &= all(math.isclose(x, y) for x, y in zip(va, vb, strict=True))
        ma, mb = ctx.mean(a, metric), ctx.mean(b, metric)
        values[a.key], values[b.key] = ma, mb
        parts.append(f"{a.label} {st.fmt(ma, spec)} vs {b.label} {st.fmt(mb, spec)}")
    text = "; ".join(parts)
    if identical:
        text += " (identical in every seed)"
    return Outcome(_with_count(verdict(flags), flags), text, values)


def _each(ctx: Context, metric: st.Metric, combos: Sequence[Combo],
          test: Callable[[float], bool], spec: str) -> Outcome:
    """``test(value)`` per seed for every combo."""
    flags: list[bool] = []
    parts: list[str] = []
    values: dict[str, float] = {}
    for combo in combos:
        flags += [test(v) for v in ctx.values(combo, metric)]
        mean = ctx.mean(combo, metric)
        values[combo.key] = mean
        parts.append(f"{combo.label} {st.fmt(mean, spec)}")
    return Outcome(_with_count(verdict(flags), flags), "; ".join(parts), values)


def _with_count(text: str, flags: Sequence[bool]) -> str:
    if text.startswith("partly"):
        return f"partly ({sum(flags)}/{len(flags)} seed comparisons)"
    return text


def _gt(a: float, b: float) -> bool:
    return a > b and not math.isclose(a, b)


def _lt(a: float, b: float) -> bool:
    return _gt(b, a)


def _both(**parts: Outcome) -> Outcome:
    """Several checks that must all hold (named, for the numbers)."""
    verdicts = [o.verdict for o in parts.values()]
    if all(v == "holds" for v in verdicts):
        final = "holds"
    elif all(v == "does not hold" for v in verdicts):
        final = "does not hold"
    else:
        final = "partly (" + "; ".join(f"{name}: {o.verdict}" for name, o in parts.items()) + ")"
    values: dict[str, float] = {}
    for name, o in parts.items():
        values.update({f"{name}:{k}": v for k, v in o.values.items()})
    return Outcome(final, " — ".join(f"{name}: {o.numbers}" for name, o in parts.items()),
                   values)


# ----------------------------------------------------------------------------- VII-A (PRA)

PRA_BY_WORKLOAD = ((PRA_EGS_WM, PRA_FPSMA_WM), (PRA_EGS_WMR, PRA_FPSMA_WMR))
PRA_WM_VS_WMR = ((PRA_FPSMA_WM, PRA_FPSMA_WMR), (PRA_EGS_WM, PRA_EGS_WMR))


def _a1(ctx: Context) -> Outcome:
    return _each(ctx, st.stuck, (PRA_FPSMA_WMR, PRA_EGS_WMR), lambda v: v < 0.25, ".0%")


def _a2(ctx: Context) -> Outcome:
    return _pairs(ctx, st.mall_avg_size, PRA_BY_WORKLOAD, _gt, ".2f")


def _a3(ctx: Context) -> Outcome:
    return _pairs(ctx, st.mall_max_size, PRA_BY_WORKLOAD, _gt, ".2f")


def _a4(ctx: Context) -> Outcome:
    pairs = ((PRA_FPSMA_WM, PRA_EGS_WM), (PRA_FPSMA_WMR, PRA_EGS_WMR))
    return _pairs(ctx, st.ft_stuck, pairs, _gt, ".1%")


def _a5(ctx: Context) -> Outcome:
    return _both(**{"FT under 200 s": _each(ctx, st.ft_fast, FIG7, lambda v: v >= 0.9, ".0%"),
                    "GADGET-2 over 400 s": _each(ctx, st.gadget_slow, FIG7,
                                                 lambda v: v >= 0.9, ".0%")})


def _a6(ctx: Context) -> Outcome:
    return _both(execution=_pairs(ctx, st.mean_exec, PRA_WM_VS_WMR, _lt, ".0f"),
                 response=_pairs(ctx, st.mean_resp, PRA_WM_VS_WMR, _lt, ".0f"))


def _a7(ctx: Context) -> Outcome:
    return _pairs(ctx, st.util, ((PRA_EGS_WM, PRA_FPSMA_WM),), _gt, ".2%")


def _a8(ctx: Context) -> Outcome:
    return _pairs(ctx, st.util, PRA_WM_VS_WMR, _gt, ".2%")


def _a9(ctx: Context) -> Outcome:
    return _pairs(ctx, st.grows, PRA_WM_VS_WMR, lambda a, b: a >= 1.5 * b, ".0f")


def _a10(ctx: Context) -> Outcome:
    return _pairs(ctx, st.grows, PRA_BY_WORKLOAD, _gt, ".1f")


# ----------------------------------------------------------------------------- VII-B (PWA)


def _b1(ctx: Context) -> Outcome:
    return _each(ctx, st.late_resizes, FIG8, lambda v: v <= 0.10, ".0%")


def _b2(ctx: Context) -> Outcome:
    return _each(ctx, st.stuck, FIG8, lambda v: v >= 0.25, ".0%")


def _b3(ctx: Context) -> Outcome:
    pairs = ((PWA_EGS_WM, PWA_FPSMA_WM), (PWA_EGS_WMR, PWA_FPSMA_WMR))
    return _pairs(ctx, st.stuck, pairs, _gt, ".1%")


def _b4(ctx: Context) -> Outcome:
    per_combo = [ctx.values(c, st.gadget_exec_median) for c in FIG8]
    flags = [max(seed) <= 1.10 * min(seed) for seed in zip(*per_combo, strict=True)]
    means = {c.key: ctx.mean(c, st.gadget_exec_median) for c in FIG8}
    text = "; ".join(f"{c.label} {st.fmt(means[c.key], '.0f')} s" for c in FIG8)
    return Outcome(_with_count(verdict(flags), flags), text, means)


def _b5(ctx: Context) -> Outcome:
    return _each(ctx, st.gadget_exec_median, FIG8, lambda v: 540 <= v <= 660, ".0f")


def _b6(ctx: Context) -> Outcome:
    pairs = tuple(zip(FIG8, FIG7, strict=True))
    return _pairs(ctx, st.gadget_exec_median, pairs, lambda a, b: a >= 1.2 * b, ".0f")


def _b7(ctx: Context) -> Outcome:
    others = (PWA_FPSMA_WM, PWA_FPSMA_WMR, PWA_EGS_WMR)
    resp = _pairs(ctx, st.mean_resp, tuple((PWA_EGS_WM, o) for o in others),
                  lambda a, b: a >= 1.5 * b, ".0f")
    wait = _pairs(ctx, st.mean_wait, tuple((PWA_EGS_WM, o) for o in others), _gt, ".1f")
    return _both(response=resp, wait=wait)


def _b8(ctx: Context) -> Outcome:
    others = (PWA_FPSMA_WM, PWA_FPSMA_WMR, PWA_EGS_WMR)
    return _pairs(ctx, st.util, tuple((PWA_EGS_WM, o) for o in others), _gt, ".1%")


def _b9(ctx: Context) -> Outcome:
    return _pairs(ctx, st.gadget_exec_median, ((PWA_FPSMA_WM, PWA_EGS_WM),), _lt, ".0f")


def _c1(ctx: Context) -> Outcome:
    pairs = tuple((c, baseline_of(c)) for c in FIG7 + FIG8)
    return _pairs(ctx, st.mean_resp, pairs, _lt, ".0f")


FINDINGS: tuple[Finding, ...] = (
    Finding("A1", "VII-A", "With Wmr, relatively few malleable jobs retain their initial size "
            "of 2.", "share of malleable jobs that never grew beyond 2 is under 25%", _a1),
    Finding("A2", "VII-A", "EGS tends to give more processors to the malleable jobs than "
            "FPSMA, on average.", "mean time-averaged size of malleable jobs, EGS > FPSMA, "
            "Wm and Wmr", _a2),
    Finding("A3", "VII-A", "... and in maximum.", "mean maximum size of malleable jobs, "
            "EGS > FPSMA, Wm and Wmr", _a3),
    Finding("A4", "VII-A", "With FPSMA, short applications (FT) may terminate before their "
            "turn to grow and stay at their minimal size; with EGS few jobs do not grow.",
            "share of malleable FT jobs that never grew, FPSMA > EGS, Wm and Wmr", _a4),
    Finding("A5", "VII-A", "Two groups of jobs: execution times under 200 s (FT) and over "
            "400 s (GADGET-2).", "at least 90% of FT jobs under 200 s and 90% of GADGET-2 "
            "jobs over 400 s, all four runs", _a5),
    Finding("A6", "VII-A", "Wm results in better performance than Wmr (execution and "
            "response times).", "mean execution and mean response time, Wm < Wmr, both "
            "policies (in part by construction: Wmr's rigid jobs keep 2 nodes)", _a6),
    Finding("A7", "VII-A", "With Wm, EGS leads to a higher utilization than FPSMA.",
            "utilization, EGS > FPSMA on Wm", _a7),
    Finding("A8", "VII-A", "Utilization is better with Wm than with Wmr.",
            "utilization, Wm > Wmr, both policies", _a8),
    Finding("A9", "VII-A", "Many more grow operations when all jobs are malleable (Wm).",
            "grow operations, Wm >= 1.5 x Wmr, both policies", _a9),
    Finding("A10", "VII-A", "More grow operations with EGS than with FPSMA.",
            "grow operations, EGS > FPSMA, Wm and Wmr", _a10),
    Finding("B1", "VII-B", "Beyond a certain time, the manager triggers no change other "
            "than the placement of jobs.", "at most 10% of the grow/shrink operations fall "
            "in the last third of the submission period, all four runs", _b1),
    Finding("B2", "VII-B", "Many jobs are stuck at their minimal size, whatever the "
            "workload and the policy.", "at least 25% of malleable jobs never grew beyond "
            "2, all four runs", _b2),
    Finding("B3", "VII-B", "This is more pronounced with EGS.", "share of malleable jobs "
            "that never grew, EGS > FPSMA, W'm and W'mr", _b3),
    Finding("B4", "VII-B", "The execution time is almost the same for the four runs.",
            "median GADGET-2 execution times of the four runs within 10% of each other", _b4),
    Finding("B5", "VII-B", "Most GADGET-2 jobs have an execution time of 600 s.",
            "median GADGET-2 execution time within 540-660 s, all four runs", _b5),
    Finding("B6", "VII-B", "... 30% higher than with PRA.", "median GADGET-2 execution "
            "time under PWA >= 1.2 x under PRA (W'm vs Wm, W'mr vs Wmr, same policy)", _b6),
    Finding("B7", "VII-B", "The response time is far worse for EGS with W'm, due to a "
            "higher wait time.", "mean response time of EGS W'm >= 1.5 x each other run, "
            "and its mean wait time the highest", _b7),
    Finding("B8", "VII-B", "This confirms the overload seen as a high utilization (EGS, "
            "W'm).", "utilization of EGS W'm above the other three runs", _b8),
    Finding("B9", "VII-B", "Favouring long-running jobs, FPSMA reduced the execution time of "
            "GADGET-2 jobs enough to keep the load low.", "median GADGET-2 execution time "
            "on W'm, FPSMA < EGS", _b9),
    Finding("C1", "VIII", "Malleability is indeed beneficial for performance.",
            "mean response time of every Fig. 7 and Fig. 8 run below the same workload "
            "without malleability (approach none)", _c1),
)


def evaluate(results: Results, variant: str = "paper") -> dict[str, Outcome]:
    """Every finding's outcome under ``variant``."""
    ctx = Context(results, variant)
    return {f.key: f.evaluate(ctx) for f in FINDINGS}
