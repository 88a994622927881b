"""``malleable experiment elastic``: malleability on a real log, the 2026 study's design.

Zojer, Posner and Ozden (arXiv 2602.17318, 2026) made 0-100% of the jobs of real Cori,
Eagle and Theta logs malleable and report, for the best strategy on each machine,
turnaround -37% to -67%, makespan -16% to -65%, wait -73% to -99% and utilization +5% to
+52% against the rigid log. This runs that design on any SWF log (a slice of it): EASY on
the rigid log as the baseline; the malleable policies at each malleable fraction and
seed (:mod:`~malleable.experiments.elastic.workload` has the rule that makes jobs
malleable); the four metrics as changes against the baseline; figures and a report that
sets our best policy beside the paper's ranges.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import time
from pathlib import Path
from typing import Any

from malleable.errors import InputError
from malleable.experiments import executor as executors
from malleable.experiments.elastic.options import add_arguments as add_arguments
from malleable.experiments.elastic.runs import (
    BASELINE,
    BASELINES,
    BY_KEY,
    DAY,
    POLICIES,
    Slice,
    run_one,
    slice_jobs,
)

METRICS = ("turnaround", "makespan", "wait", "utilization")
#: The paper's ranges (best strategy per machine, change vs the rigid log, %).
PAPER = {"turnaround": (-67.0, -37.0), "makespan": (-65.0, -16.0), "wait": (-99.0, -73.0),
         "utilization": (5.0, 52.0)}


def _fractions(text: str) -> list[float]:
    try:
        values = [float(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise InputError(f"--malleable-fraction {text!r}: give percentages, e.g. "
                         "0,20,50,100") from None
    if not values or any(not 0 <= v <= 100 for v in values):
        raise InputError(f"--malleable-fraction {text!r}: percentages in 0-100")
    return sorted(set(values))


def run(args: argparse.Namespace) -> int:
    fractions = _fractions(args.malleable_fraction)
    policies = [p.strip() for p in args.policies.split(",") if p.strip()]
    bases = {b.key for b in BASELINES.values()}
    unknown = [p for p in policies if p not in BY_KEY or p in bases]
    if unknown or not policies:
        raise InputError(f"--policies: unknown {', '.join(unknown) or '(none given)'}; "
                         f"valid: {', '.join(p.key for p in POLICIES)}")
    if args.quick:
        args.reps, args.slice_days = 1, 7.0
    if args.reps < 1 or args.workers < 1:
        raise InputError("--reps and --workers must be at least 1")
    if args.slice_start < 0 or not args.slice_days > 0:
        raise InputError("--slice-start must be 0 or more and --slice-days positive")
    out: Path = args.out
    _make_dir(out)
    cut = _slice(args, out)
    jobs, nodes, name = slice_jobs(cut)
    if not jobs:
        raise InputError(f"no job in days {args.slice_start:g}-"
                         f"{args.slice_start + args.slice_days:g} of the log",
                         source=str(args.trace))
    seeds = list(range(args.seed, args.seed + args.reps))
    base = BASELINES[args.baseline].key
    rule = args.size_range
    tasks: list[tuple[Any, ...]] = [(base, 0.0, seeds[0], cut, None, rule)]
    for f in fractions:
        for p in policies:
            for s in (seeds[:1] if f == 0 else seeds):
                tasks.append((p, f / 100, s, cut, None, rule))
    began = time.monotonic()
    rows = executors.from_args(args).map(run_one, tasks, _progress(len(tasks), args.json))
    elapsed = time.monotonic() - began
    summary = summarize(rows, fractions, policies, seeds, base)
    summary.update(log=name, nodes=nodes, jobs=len(jobs), slice_start_day=cut.start,
                   slice_days=cut.days, size_range=rule, simulations=len(rows),
                   elapsed_s=round(elapsed, 1))
    (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n", encoding="utf-8")
    from malleable.experiments.elastic.report import draw, write_report

    write_report(summary, out)
    draw(summary, out)
    if args.json:
        print(json.dumps(summary))
    else:
        print(f"report: {out / 'report.md'}; figures: {out}/elastic_*.png "
              f"({len(rows)} simulations, {elapsed:.0f} s)")
    return 0


def _make_dir(out: Path) -> None:
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"cannot create the output directory: {exc.strerror}",
                         source=str(out)) from None


def _slice(args: argparse.Namespace, out: Path) -> Slice:
    """The log's slice: the --trace's days, or the whole of a generated Lublin log."""
    if (args.trace is None) == (args.lublin is None):
        raise InputError("give one of --trace LOG and --lublin JOBS")
    if args.trace is not None:
        return Slice(str(args.trace), args.slice_start, args.slice_days)
    from malleable.workloads import lublin

    if not 1 <= args.lublin <= 1_000_000 or not 2 <= args.lublin_nodes <= 1_000_000:
        raise InputError("--lublin takes 1..1000000 jobs and --lublin-nodes 2..1000000")
    path = out / f"lublin-{args.lublin}-seed{args.lublin_seed}.swf"
    made = lublin.generate(args.lublin, args.lublin_nodes, args.lublin_seed)
    path.write_text("\n".join(lublin.swf_lines(made, args.lublin_nodes, args.lublin_seed,
                                                "whole")) + "\n", encoding="utf-8")
    return Slice(str(path), 0.0, math.floor(made[-1].submit / DAY) + 1.0)


def _progress(total: int, quiet: bool) -> Any:
    import sys

    count = [0]

    def done(_: int) -> None:
        count[0] += 1
        if not quiet:
            print(f"\rsimulated {count[0]}/{total}", end="", file=sys.stderr, flush=True)
            if count[0] == total:
                print(file=sys.stderr)

    return done


def _change(value: float, base: float) -> float:
    return (value - base) / base * 100.0 if base else math.nan


def summarize(rows: list[dict[str, Any]], fractions: list[float], policies: list[str],
              seeds: list[int], baseline: str = BASELINE.key) -> dict[str, Any]:
    """Per policy and fraction: the metrics' means and their changes vs the baseline
    (% of the baseline; mean, min and max over seeds); then the best policy's change per
    metric at each fraction and its place against the paper's range."""
    base = next(r for r in rows if r["policy"] == baseline)
    results: dict[str, dict[str, Any]] = {}
    for p in policies:
        per: dict[str, Any] = {}
        for f in fractions:
            group = [r for r in rows if r["policy"] == p and r["fraction"] == f / 100]
            if not group:
                continue
            entry: dict[str, Any] = {}
            for m in METRICS:
                changes = [_change(r[m], base[m]) for r in group]
                entry[m] = {"mean": statistics.fmean(r[m] for r in group),
                            "change": statistics.fmean(changes), "min": min(changes),
                            "max": max(changes)}
            entry["node_seconds"] = statistics.fmean(
                _change(r["node_seconds"], base["node_seconds"]) for r in group)
            entry["completed"] = min(r["completed"] for r in group)
            entry["grows"] = statistics.fmean(r["grows"] for r in group)
            entry["shrinks"] = statistics.fmean(r["shrinks"] for r in group)
            per[f"{f:g}"] = entry
        results[p] = per
    best: dict[str, Any] = {}
    for f in fractions:
        key = f"{f:g}"
        best[key] = {}
        for m in METRICS:
            sign = 1 if m == "utilization" else -1  # a gain: up for utilization
            candidates = [(p, results[p][key][m]["change"]) for p in policies
                          if key in results[p]]
            if not candidates:
                continue
            p, change = max(candidates, key=lambda c: sign * c[1])
            low, high = PAPER[m]
            place = ("inside" if low <= change <= high else
                     "above (a larger gain)" if sign * change > max(sign * low, sign * high)
                     else "below (a smaller gain)")
            best[key][m] = {"policy": p, "change": change, "paper": [low, high],
                            "place": place}
    return {"baseline_policy": baseline,
            "baseline": {m: base[m] for m in (*METRICS, "completed", "jobs", "node_seconds",
                                              "last_submit")},
            "fractions": fractions, "policies": policies, "seeds": seeds,
            "results": results, "best": best,
            "paper": {m: list(v) for m, v in PAPER.items()}}
