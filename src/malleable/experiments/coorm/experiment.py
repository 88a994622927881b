"""``malleable experiment coorm``: CooRM vs the OAR-like baseline (Figs. 6 and 7).

Fig. 6: for 1 to 8 clusters of 128 hosts, the number of computed configurations,
the scheduler's CPU time and the total message size, over instances of W0 (CooRM
and the OAR-like baseline) and W1-W3 (CooRM). Fig. 7: the end-time increase of
W1's CEM application as its adaptation delay crosses the fair-start delay.
Writes ``fig6.png``, ``fig7.png``, ``report.md`` and ``summary.json`` (also as
``results.json``, its older name) into ``--out``; ``--json`` prints the key numbers
per cluster count.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)

from malleable.errors import InputError
from malleable.experiments import executor as executors
from malleable.experiments.coorm.options import add_arguments as add_arguments
from malleable.experiments.coorm.runs import RunOutcome, RunSpec, Setup, quartiles, run_one
from malleable.metrics.summary import write_summary
from malleable.workloads.swf import read_swf

SERIES: tuple[tuple[str, str], ...] = (("oar", "W0"), ("coorm", "W0"), ("coorm", "W1"),
                                       ("coorm", "W2"), ("coorm", "W3"))


@dataclass(frozen=True, slots=True)
class Plan:
    """What one invocation runs."""

    setup: Setup
    clusters: tuple[int, ...]
    instances: int
    delays: tuple[float, ...]
    fig7_clusters: int
    fig7_instances: int
    workers: int
    quick: bool = False
    specs: list[RunSpec] = field(default_factory=list)


def run(args: argparse.Namespace) -> int:
    plan = make_plan(args)
    args.out.mkdir(parents=True, exist_ok=True)
    columns = (TextColumn("coorm"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
               TextColumn("{task.description}"))
    # the simulations, the two figures and the report are the steps of one bar, so that the
    # bar is full only when every file is written
    console = Console(stderr=True)
    with Progress(*columns, console=console, transient=False,
                  disable=not console.is_terminal) as progress:  # bars on a terminal only
        task = progress.add_task("", total=len(plan.specs) + len(WRITING_STEPS))
        started = time.monotonic()
        outcomes = execute(plan, _progress_runner(plan, progress, task,
                                                    executors.from_args(args)))
        wall = time.monotonic() - started
        summary = summarise(plan, outcomes, wall)
        _write(summary, args.out, lambda step: progress.update(task, advance=1,
                                                               description=step))
    if args.json:
        print(json.dumps(key_numbers(summary), indent=1, sort_keys=True))
    else:
        Console().print(f"wrote {args.out}/report.md, fig6.png, fig7.png, summary.json "
                        f"({wall:.0f} s)")
    return 0


WRITING_STEPS = ("drew fig6.png", "drew fig7.png", "wrote report.md and summary.json")


def _write(summary: dict[str, Any], out: Path, done: Callable[[str], None]) -> None:
    from malleable.experiments.coorm.figures import draw_fig6, draw_fig7
    from malleable.experiments.coorm.report import write_report

    draw_fig6(summary, out / "fig6.png")
    done(WRITING_STEPS[0])
    draw_fig7(summary, out / "fig7.png")
    done(WRITING_STEPS[1])
    write_report(summary, out / "report.md")
    write_summary(out, summary, legacy=True, indent=1, sort_keys=True)
    done(WRITING_STEPS[2])


# ----------------------------------------------------------------------------- plan


def make_plan(args: argparse.Namespace) -> Plan:
    quick = bool(args.quick)
    setup = Setup(
        hosts=_positive(args.hosts, 16 if quick else 128, "--hosts"),
        jobs=_positive(args.jobs, 20 if quick else 200, "--jobs-per-pack"),
        seed=args.seed,
        swf=str(args.swf) if args.swf is not None else None,
        swf_cores_per_host=_positive(args.swf_cores_per_host, 1, "--swf-cores-per-host"))
    if args.swf is not None:
        read_swf(args.swf)  # a bad trace is refused before anything runs
    plan = Plan(
        setup=setup,
        clusters=parse_clusters(args.clusters or ("1,2" if quick else "1-8")),
        instances=_positive(args.instances, 1 if quick else 2, "--instances"),
        delays=parse_delays(args.delays or ("0,10" if quick else "0,2,4,6,8,10")),
        fig7_clusters=_positive(args.fig7_clusters, 2 if quick else 4, "--fig7-clusters"),
        fig7_instances=_positive(args.fig7_instances, 2 if quick else 4, "--fig7-instances"),
        workers=_positive(args.workers, 1, "--workers"),
        quick=quick)
    plan.specs.extend(build_specs(plan))
    return plan


def build_specs(plan: Plan) -> list[RunSpec]:
    specs = [RunSpec(system, wl, nc, k) for nc in plan.clusters for k in range(plan.instances)
             for system, wl in SERIES]
    specs += [RunSpec("coorm", "W1", plan.fig7_clusters, k, delay=d)
              for k in range(plan.fig7_instances) for d in plan.delays]
    # one run that also counts JSON bytes (encoding costs CPU, so not in the CPU figures)
    specs.append(RunSpec("coorm", "W0", plan.clusters[-1], 0, count_json=True))
    unique: dict[RunSpec, None] = dict.fromkeys(specs)
    return list(unique)


def parse_clusters(text: str) -> tuple[int, ...]:
    values: list[int] = []
    try:
        for part in text.split(","):
            if "-" in part:
                low, high = (int(x) for x in part.split("-", 1))
                values.extend(range(low, high + 1))
            elif part.strip():
                values.append(int(part))
    except ValueError:
        raise InputError(f"--clusters {text!r}: expected counts like 1-8 or 1,2,4,8") from None
    if not values or min(values) < 1:
        raise InputError(f"--clusters {text!r}: need at least one count, each >= 1")
    return tuple(sorted(set(values)))


def parse_delays(text: str) -> tuple[float, ...]:
    try:
        values = sorted({float(x) for x in text.split(",") if x.strip()})
    except ValueError:
        raise InputError(f"--delays {text!r}: expected seconds like 0,2,5,10") from None
    if not values or values[0] != 0.0 or not all(math.isfinite(v) for v in values):
        raise InputError(f"--delays {text!r}: must include 0 (the reference) and be finite")
    return tuple(values)


def _positive(value: int | None, default: int, flag: str) -> int:
    chosen = default if value is None else value
    if chosen < 1:
        raise InputError(f"{flag} must be at least 1, not {chosen}")
    return chosen


# ----------------------------------------------------------------------------- running

Runner = Callable[[Setup, Sequence[RunSpec]], list[RunOutcome]]


def execute(plan: Plan, runner: Runner) -> list[RunOutcome]:
    return runner(plan.setup, plan.specs)


def _progress_runner(plan: Plan, progress: Progress, task: TaskID,
                     executor: executors.Executor | None = None) -> Runner:
    def runner(setup: Setup, specs: Sequence[RunSpec]) -> list[RunOutcome]:
        return _run_all(setup, specs, plan.workers,
                        lambda s: progress.update(task, advance=1, description=_label(s)),
                        executor)
    return runner


def _label(spec: RunSpec) -> str:
    extra = f" delay {spec.delay:g}s" if spec.delay else ""
    return f"{spec.system} {spec.workload} nC={spec.clusters} #{spec.instance}{extra}"


def _run_all(setup: Setup, specs: Sequence[RunSpec], workers: int,
             done: Callable[[RunSpec], None],
             executor: executors.Executor | None = None) -> list[RunOutcome]:
    # the slowest runs first, so that two workers finish together
    ordered = sorted(specs, key=lambda s: (-s.clusters * (2 if s.workload == "W2" else 1)))
    ex = executor if executor is not None else executors.Local(min(workers, os.cpu_count() or 1))
    return ex.map(run_one, [(setup, spec) for spec in ordered], lambda i: done(ordered[i]))


# ----------------------------------------------------------------------------- numbers


def summarise(plan: Plan, outcomes: Sequence[RunOutcome], wall: float) -> dict[str, Any]:
    fig6: dict[str, dict[str, dict[str, Any]]] = {}
    for nc in plan.clusters:
        fig6[str(nc)] = {}
        for system, wl in SERIES:
            runs = [o for o in outcomes if o.spec.system == system and o.spec.workload == wl
                    and o.spec.clusters == nc and o.spec.delay == 0 and not o.spec.count_json]
            fig6[str(nc)][f"{system}_{wl}"] = _metrics(runs)
    json_runs = [o for o in outcomes if o.spec.count_json]
    return {
        "parameters": {**asdict(plan.setup), "clusters": list(plan.clusters),
                       "instances": plan.instances, "delays": list(plan.delays),
                       "fig7_clusters": plan.fig7_clusters,
                       "fig7_instances": plan.fig7_instances, "workers": plan.workers,
                       "quick": plan.quick},
        "wall_time_s": wall,
        "cpu_time_s": sum(o.cpu_time for o in outcomes),
        "runs": len(outcomes),
        "fig6": fig6,
        "fig7": _fig7(plan, outcomes),
        "json_bytes": ({"cdr_bytes": json_runs[0].cdr_bytes,
                        "json_bytes": json_runs[0].json_bytes,
                        "clusters": json_runs[0].spec.clusters} if json_runs else {}),
    }


def _metrics(runs: Sequence[RunOutcome]) -> dict[str, Any]:
    if not runs:
        return {}
    return {
        "computed": quartiles([float(o.computed) for o in runs]),
        "evaluated": quartiles([float(o.evaluated) for o in runs]),
        "cpu_time_s": quartiles([o.cpu_time for o in runs]),
        "cdr_mb": quartiles([o.cdr_bytes / 1e6 for o in runs]),
        "cdr_kb_per_app": quartiles([o.cdr_bytes / 1e3 / o.apps for o in runs]),
        "messages": quartiles([float(o.messages) for o in runs]),
        "kb_per_app_by_type": {t: quartiles([o.cdr_by_type.get(t, 0) / 1e3 / o.apps
                                             for o in runs])
                               for t in sorted({t for o in runs for t in o.cdr_by_type})},
        "change_notifies_per_app": quartiles([o.change_notifies / o.apps for o in runs]),
        "steps_per_change_notify": quartiles([o.cap_steps / o.change_notifies
                                              for o in runs if o.change_notifies]),
        # the same messages if a CAP step took 12 bytes (time and hosts packed, no padding)
        "cdr_mb_packed_steps": quartiles([(o.cdr_bytes - 4 * o.cap_steps) / 1e6
                                          for o in runs]),
        "policy_runs": quartiles([float(o.policy_runs) for o in runs]),
        "mean_response_h": quartiles([o.mean_response / 3600 for o in runs]),
        "makespan_h": quartiles([o.makespan / 3600 for o in runs]),
        "instances": len(runs),
    }


def _fig7(plan: Plan, outcomes: Sequence[RunOutcome]) -> dict[str, Any]:
    ends: dict[tuple[int, float], float] = {
        (o.spec.instance, o.spec.delay): o.cem_end for o in outcomes
        if o.spec.workload == "W1" and o.spec.clusters == plan.fig7_clusters
        and o.spec.instance < plan.fig7_instances and not o.spec.count_json}
    increases: dict[str, list[float]] = {}
    for d in plan.delays:
        increases[f"{d:g}"] = sorted(
            ends[(k, d)] - ends[(k, 0.0)] for k in range(plan.fig7_instances)
            if (k, d) in ends and (k, 0.0) in ends)
    return {"fair_start": plan.setup.fair_start, "clusters": plan.fig7_clusters,
            "increase_s": increases}


def key_numbers(summary: dict[str, Any]) -> dict[str, Any]:
    """Medians per cluster count for CooRM and the baseline, and Fig. 7's summary."""
    per_nc: dict[str, Any] = {}
    for nc, series in summary["fig6"].items():
        per_nc[nc] = {name: {metric: values["median"] for metric, values in m.items()
                             if isinstance(values, dict) and "median" in values}
                      for name, m in series.items() if m}
    fig7 = {d: {"median_s": quartiles(v).get("median"), "max_s": max(v, default=math.nan),
                "share_delayed": (sum(x > 1.0 for x in v) / len(v)) if v else math.nan}
            for d, v in summary["fig7"]["increase_s"].items()}
    return {"clusters": per_nc, "fig7": fig7, "fair_start_s": summary["fig7"]["fair_start"],
            "wall_time_s": round(summary["wall_time_s"], 1), "runs": summary["runs"]}
