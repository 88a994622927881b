"""``experiment koala --background-trace LOG``: the paper's runs with a real log's users.

The real DAS-3 was shared with its local users (the paper: "the only background load ...
is the activity of concurrent users", which it judged "does not disturb the measures").
This replays a real log's jobs on every simulated cluster as local users' load that the
manager sees and does not control (:class:`~malleable.sim.background.TraceBackground`).
It is a condition taken from real data: not a tuning, and not the paper's stated setting.

Windows: every start on the hour whose :data:`WINDOW` fits in the log is ranked by the load
the log shows over the five sites' windows (site ``i`` ``i`` weeks later); by default the
runs take the median window (``q50``: a typical half-day), the 75th and 90th percentiles
(busy ones) and the busiest (``max``): the spread of the users' load over the year, from
the typical to the worst, none picked for an outcome.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from malleable.errors import InputError
from malleable.experiments.koala.findings import FINDINGS, evaluate
from malleable.experiments.koala.options import DEFAULT_WINDOWS as DEFAULT_WINDOWS
from malleable.experiments.koala.runs import BASELINE, FIG7, FIG8, Results, Variant
from malleable.sim.background import TraceBackground
from malleable.workloads.reallog import (
    RealLog,
    background_jobs,
    quantile_windows,
    read_log,
    window_loads,
)

#: A window's length (s): Wm's 300 arrivals span 10 h, and its last jobs end within 2 h.
WINDOW = 12 * 3600.0
SITES = 5  # DAS-3's clusters


def parse_windows(text: str) -> list[str]:
    """``q50,q90,max,3600`` as labels: ``qNN`` (0-100), ``max``, or a start in seconds."""
    labels = [part.strip() for part in text.split(",") if part.strip()]
    if not labels:
        raise InputError("--background-window: give at least one window (e.g. q50,q90,max)")
    for label in labels:
        if label == "max":
            continue
        try:
            value = float(label[1:]) if label.startswith("q") else float(label)
        except ValueError:
            raise InputError(f"--background-window {label!r}: use qNN (a quantile 0-100), "
                             "max, or a start in seconds") from None
        if not (0 <= value <= 100 if label.startswith("q") else value >= 0):
            raise InputError(f"--background-window {label!r}: a quantile lies in 0-100, a "
                             "start is 0 or more")
    return labels


def variants(path: Path, windows: Sequence[str]) -> tuple[list[Variant], RealLog]:
    """One variant per window of the log at ``path`` (its description says which and its
    load as the log shows it)."""
    log = read_log(path)
    loads = window_loads(log, WINDOW, sites=SITES)
    jobs = background_jobs(log)
    result: list[Variant] = []
    for label in windows:
        if label.startswith("q") or label == "max":
            q = 1.0 if label == "max" else float(label[1:]) / 100
            start, load = quantile_windows(loads, (q,))[0]
        else:
            start = float(label) % max(log.span, 1.0)
            load = min(loads, key=lambda w: abs(w[0] - start))[1]
        desc = (f"{log.name}'s users on every cluster, window {label}: from {start:.0f} s "
                f"(day {start / 86400:.1f} of the log; site i i weeks later), the log "
                f"shows {load:.0%} of its machine busy over these windows")
        result.append(Variant(f"real-{label}", desc, background_trace=TraceBackground(
            jobs, log.nodes, start, log.name)))
    return result, log


def section(results: Results, real: Sequence[Variant], log: RealLog | None) -> list[str]:
    """report.md's section: every finding's verdict with and without the users' load."""
    present = [v for v in real if v.name in results.variants()]
    if not present or log is None:
        return []
    names = ["paper", *[v.name for v in present]]
    outcomes = {n: evaluate(results, n) for n in names}
    lines = ["## With a real log's users as local load (real data; not the paper's setting)",
             "",
             f"Each cluster carries {log.name}'s jobs ({len(log.jobs)} jobs that ran, "
             f"{log.nodes} nodes, {log.skipped} lines skipped: no size or no run time) as "
             "local users' load the manager sees and does not control. Rule "
             "(docs/simulate.md, Background load from a real log): sizes scaled by the "
             "cluster's nodes over the log's, run times as logged, the jobs running at the "
             "window's start start at 0 for the rest of their run, site i replays i weeks "
             "later; each cluster starts its local jobs FCFS before the manager's cycle. "
             "This is a condition taken from real data, not a tuning and not the paper's "
             "stated setting (the paper had no load model: it judged its users' load not to "
             "disturb the measures). Windows (12 h, ranked by the load the log shows; "
             "the median, the 75th and 90th percentiles and the busiest, none picked for an "
             "outcome):", ""]
    lines += [f"- **{v.name}**: {v.description}" for v in present]
    lines += ["", "| # | the paper | empty (paper setting) | " +
              " | ".join(v.name for v in present) + " |",
              "|---|---|---|" + "---|" * len(present)]
    for f in FINDINGS:
        cells = [outcomes[n][f.key].verdict for n in names]
        lines.append(f"| {f.key} | {f.claim.replace('|', '/')} | " + " | ".join(cells) + " |")
    changed = [f.key for f in FINDINGS
               if any(outcomes[n][f.key].verdict != outcomes["paper"][f.key].verdict
                      for n in names[1:])]
    only_loaded = [f.key for f in FINDINGS if outcomes["paper"][f.key].verdict != "holds"
                   and any(outcomes[n][f.key].verdict == "holds" for n in names[1:])]
    lost = [f.key for f in FINDINGS if outcomes["paper"][f.key].verdict == "holds"
            and any(outcomes[n][f.key].verdict != "holds" for n in names[1:])]
    lines += ["", "Measured background (means over all runs of the window): " + "; ".join(
        f"{v.name}: {mean_of(results, v.name, 'background_utilization'):.1%} of the platform, "
        f"{mean_of(results, v.name, 'background_jobs'):.0f} local jobs a run, mean wait of "
        f"the manager's jobs {mean_of(results, v.name, 'mean_wait_s'):.1f} s"
        for v in present) + ".", "",
              "Did the users' load disturb the measures (the paper's judgement)? Findings "
              f"whose verdict changes under some window: {', '.join(changed) or 'none'}; "
              f"that hold only with the load: {', '.join(only_loaded) or 'none'}; that hold "
              f"empty and not under some window: {', '.join(lost) or 'none'}.", ""]
    from malleable.experiments.koala.report import summary_table
    for v in present:
        lines += ["", f"### {v.name}", "", *summary_table(results, FIG7 + FIG8 + BASELINE,
                                                          v.name)]
    return [*lines, ""]


def mean_of(results: Results, variant: str, key: str) -> float:
    values = [r.summary.get(key, 0.0) for (_, name), runs in results.runs.items()
              if name == variant for r in runs]
    return sum(values) / len(values) if values else 0.0
