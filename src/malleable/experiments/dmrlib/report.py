"""Key numbers, Table 7 and the report of the DMRlib study, beside the paper's figures.

The paper's numbers below are the ones its text states (section 5.5, 5.6 and
Appendix B); its figures are not published as data, so cells the text does not give
stay empty rather than being read off a plot.
"""

from __future__ import annotations

import csv
import math
from pathlib import Path
from typing import Any

from malleable.experiments.dmrlib.results import VERSIONS, Study
from malleable.workloads.dmrlib import ALL, NONE, TABLE7_MIXES, Submission, Version
from malleable.workloads.dmrlib_apps import APPS, CAP, NODES, gain_differences

#: What the paper's text states, with where.
PAPER: dict[str, Any] = {
    "rigid_completion_speedup": 3.25,  # 5.5: "speedup ~= 3.25x", malleable vs fixed, rigid
    "moldable_completion_speedup_large": 1.5,  # 5.5: "remains constant around 1.5x"
    "moldable_completion_speedup_100": 2.2,  # 5.5: 100-job workload
    "moldable_workload_speedup_100": 3.0,  # 5.5: "processed 3x faster" (100 jobs)
    "moldable_workload_speedup_1000": 1.5,  # 5.5: "1.5x speedup of the global throughput"
    "rigid_workload_speedup": 3.0,  # 5.5 / Fig. 8a: "speedups around 3x"
    "flexible_execution_speedup_max": 2.0,  # Fig. 8b: "speedups of up to 2x" vs pure moldable
    "energy_ratio": {"pure malleable": 0.30, "pure moldable": (0.40, 0.50), "flexible": 0.20},
    "table7": {  # section 5.6, percent; time is % of the fixed workload's
        "rigid": {"allocation": {"none": 96.37},
                  "time": {"75%": 53.77, "N-body": 56.39, "all": 36.12}},
        "moldable": {"allocation": {}, "time": {"CG": 25.51, "all": 25.15}},
    },
}


def _r(value: float, digits: int = 3) -> float | None:
    """Rounded for JSON; None for NaN and infinities (JSON has neither)."""
    return round(value, digits) if math.isfinite(value) else None


def _ratio(a: float, b: float) -> float:
    """a / b; infinite when only b is 0 (no wait at all), NaN when both are."""
    if b > 0:
        return a / b
    return math.inf if a > 0 else math.nan


def speedups(study: Study, jobs: int, submission: Submission) -> dict[str, float]:
    """Fig. 4's speedups of the malleable workload over its non-malleable counterpart."""
    base = study.get(jobs, submission, NONE)
    mall = study.get(jobs, submission, ALL)
    return {"wait": _ratio(base.mean_wait, mall.mean_wait),
            "execution": _ratio(base.mean_execution, mall.mean_execution),
            "completion": _ratio(base.mean_completion, mall.mean_completion),
            "workload": _ratio(base.workload_time, mall.workload_time)}


def table7(study: Study) -> dict[str, dict[str, dict[str, float]]]:
    """Allocation rate (%) and workload time (% of the fixed workload) per mix."""
    n = study.table7_jobs
    fixed = study.get(n, Submission.RIGID, NONE).workload_time
    cells: dict[str, dict[str, dict[str, float]]] = {}
    for sub in Submission:
        row_a, row_t = {}, {}
        for mix in TABLE7_MIXES:
            o = study.get(n, sub, mix)
            row_a[mix.name] = 100.0 * o.allocation
            row_t[mix.name] = 100.0 * _ratio(o.workload_time, fixed)
        cells[sub.value] = {"allocation": row_a, "time": row_t}
    return cells


def key_numbers(study: Study) -> dict[str, Any]:
    """The --json object (also written as results.json)."""
    sizes: dict[str, Any] = {}
    for n in study.sizes:
        fixed = study.version(n, Version.FIXED)
        per: dict[str, Any] = {"speedup": {}, "versions": {}}
        for sub in Submission:
            per["speedup"][sub.value] = {k: _r(v) for k, v in speedups(study, n, sub).items()}
        for version in VERSIONS:
            o = study.version(n, version)
            per["versions"][version.value] = {
                "mean_wait_s": _r(o.mean_wait, 1), "mean_execution_s": _r(o.mean_execution, 1),
                "mean_completion_s": _r(o.mean_completion, 1),
                "workload_time_s": _r(o.workload_time, 1),
                "allocation_rate": _r(o.allocation, 4), "energy_kwh": _r(o.energy, 2),
                "energy_ratio": _r(_ratio(o.energy, fixed.energy)),
                "workload_time_ratio": _r(_ratio(o.workload_time, fixed.workload_time)),
                "grows": o.grows, "shrinks": o.shrinks, "completed": o.completed}
        sizes[str(n)] = per
    t7 = {sub: {row: {k: _r(v, 2) for k, v in cells.items()} for row, cells in rows.items()}
          for sub, rows in table7(study).items()}
    return {"experiment": "dmrlib", "source": study.source, "sizes": list(study.sizes),
            "seeds": list(study.seeds), "options": study.options,
            "elapsed_s": round(study.elapsed, 2), "workloads": sizes,
            "table7": {"jobs": study.table7_jobs, **t7}, "findings": findings(study),
            "paper": PAPER}


def findings(study: Study) -> dict[str, bool]:
    """The paper's qualitative findings, checked on our numbers (True: it holds)."""
    rigid = [speedups(study, n, Submission.RIGID)["completion"] for n in study.sizes]
    mold = [speedups(study, n, Submission.MOLDABLE)["completion"] for n in study.sizes]
    v = study.version
    return {
        "malleability_helps_most_under_rigid": all(r > m for r, m in zip(rigid, mold,
                                                                          strict=True)),
        "rigid_completion_speedup_at_least_2x": all(r >= 2.0 for r in rigid),
        "moldable_submission_alone_helps": all(
            v(n, Version.PURE_MOLDABLE).workload_time < v(n, Version.FIXED).workload_time
            for n in study.sizes),
        "pure_moldable_jobs_run_longer": all(
            v(n, Version.PURE_MOLDABLE).mean_execution > max(
                v(n, Version.FIXED).mean_execution, v(n, Version.FLEXIBLE).mean_execution)
            for n in study.sizes),
        "energy_falls_with_malleability": all(
            v(n, Version.PURE_MALLEABLE).energy < v(n, Version.FIXED).energy
            and v(n, Version.FLEXIBLE).energy < v(n, Version.PURE_MOLDABLE).energy
            for n in study.sizes),
    }


def write_table7(study: Study, out: Path) -> None:
    """table7.csv and table7.md (ours, and the paper's cells its text gives)."""
    cells = table7(study)
    names = [m.name for m in TABLE7_MIXES]
    with (out / "table7.csv").open("w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(["submission", "metric", *names])
        for sub, rows in cells.items():
            for metric, row in rows.items():
                writer.writerow([sub, metric, *(f"{row[n]:.2f}" for n in names)])
    (out / "table7.md").write_text(table7_markdown(study), encoding="utf-8")


def table7_markdown(study: Study) -> str:
    cells = table7(study)
    names = [m.name for m in TABLE7_MIXES]
    head = "| submission | metric | " + " | ".join(names) + " |\n|---|---|" + "---|" * len(names)
    lines = [f"Table 7 ({study.table7_jobs} jobs): allocation rate (%) and workload time "
             "(% of the fixed workload's); malleable jobs per column.", "", "Ours:", "", head]
    for sub, rows in cells.items():
        for metric, row in rows.items():
            lines.append(f"| {sub} | {metric} | " + " | ".join(f"{row[n]:.2f}" for n in names)
                         + " |")
    lines += ["", "The paper (only the cells its text states):", "", head]
    for sub, rows in PAPER["table7"].items():
        for metric, row in rows.items():
            lines.append(f"| {sub} | {metric} | " + " | ".join(
                f"{row[n]:.2f}" if n in row else "" for n in names) + " |")
    return "\n".join(lines) + "\n"


def curve_table() -> str:
    """The applications' curves and gain differences, as a markdown table."""
    lines = ["| app | lower | upper | preferred | base time (s) | gain differences (%) |",
             "|---|---|---|---|---|---|"]
    for app in APPS:
        gains = ", ".join(f"{n}: {s:.0f}" for n, s in gain_differences(app.table) if n <= CAP)
        lines.append(f"| {app.label} | {app.lower} | {app.upper} | {app.preferred} | "
                     f"{app.base_time:.0f} at {app.reference} | {gains} |")
    return "\n".join(lines) + f"\n\nPlatform: one cluster of {NODES} nodes, jobs capped at {CAP}."
