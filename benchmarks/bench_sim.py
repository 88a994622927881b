#!/usr/bin/env python3
"""Simulator speed: KOALA workloads, a large malleable workload, and AccaSim side by side.

    python3 benchmarks/bench_sim.py            # 100,000-job runs (a few minutes)
    python3 benchmarks/bench_sim.py --quick    # 10,000-job runs
    python3 benchmarks/bench_sim.py --no-accasim

It prints, in one invocation:

1. each 300-job KOALA workload (Wm, Wmr under PRA; W'm, W'mr under PWA; FPSMA and
   EGS): time per run and simulated jobs per second (target: well under a second);
2. a 100,000-job synthetic malleable workload (the KOALA mix of FT and GADGET-2,
   all malleable, one job every 30 s) on the five DAS-3 clusters, under PRA/FPSMA
   and PWA/EGS (target: under a minute on one core);
3. the same rigid trace (``gen_swf.py``: 100,000 jobs, one 128-node cluster) run
   by AccaSim 1.1.3 (FIFO + first fit) and by ``malleable simulate --policy fcfs
   --platform 128 --workload TRACE.swf --json``, as a user runs it (strict FCFS, first
   fit; whole process, reading the trace and writing jobs.csv): both throughputs,
   their ratio (target: ours >= 10x AccaSim's) and whether every job starts at the
   same time in both (compared job by job).

AccaSim lives in its own virtual environment (``--accasim-venv``, default
``.venv-accasim`` at the repository root, gitignored), created from the shared
lock file when missing; when pip cannot install it, that part is skipped with a
message. AccaSim runs twice: once without per-job output (its throughput) and once
with its dispatching plan (the start times to compare), as its README advises.
Throughputs are given on wall time and on CPU time (the machine is shared). Ours is
the whole ``malleable simulate`` process; AccaSim's loop time
is the one it reports (it reads the trace as it simulates), its CPU time is that of
its process less the CPU time of a process that only starts and imports AccaSim.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))

from malleable.model import DAS3  # noqa: E402
from malleable.policies.koala import KoalaPolicy  # noqa: E402
from malleable.sim.run import SimConfig, simulate  # noqa: E402
from malleable.workloads.koala import koala_workload  # noqa: E402

#: AccaSim's system start time (the ``start_time`` of the shared sys-128x1.json).
ACCASIM_EPOCH = 1_000_000_000
T = TypeVar("T")


@dataclass
class Timing:
    wall: float
    cpu: float

    def rate(self, jobs: int) -> tuple[float, float]:
        return jobs / self.wall, jobs / self.cpu


def timed(fn: Callable[[], T]) -> tuple[T, Timing]:
    wall, cpu = time.perf_counter(), time.process_time()
    result = fn()
    return result, Timing(time.perf_counter() - wall, time.process_time() - cpu)


def line(label: str, jobs: int, timing: Timing, extra: str = "") -> None:
    wall_rate, cpu_rate = timing.rate(jobs)
    print(f"  {label:<34} {jobs:>7} jobs  {timing.wall:8.3f} s  {wall_rate:>9,.0f} jobs/s "
          f"(cpu {timing.cpu:7.3f} s, {cpu_rate:>9,.0f} jobs/s){extra}")


# --------------------------------------------------------------------------- part 1 and 2


def bench_koala(seed: int) -> None:
    print("KOALA workloads (300 jobs, DAS-3): target well under 1 s a run")
    for workload, approach in (("wm", "pra"), ("wmr", "pra"), ("wm-prime", "pwa"),
                               ("wmr-prime", "pwa")):
        for policy in ("fpsma", "egs"):
            jobs = koala_workload(workload, seed)
            _, timing = timed(partial(simulate, jobs, DAS3, KoalaPolicy.named(approach, policy)))
            line(f"{workload} {approach} {policy}", len(jobs), timing,
                 "  ok" if timing.wall < 1.0 else "  SLOW")


def bench_large(n_jobs: int, seed: int) -> None:
    print(f"Synthetic malleable workload ({n_jobs:,} jobs, FT/GADGET-2 mix, one every 30 s, "
          "DAS-3): target under 60 s")
    jobs = koala_workload("wm-prime", seed, jobs=n_jobs)
    for approach, policy in (("pra", "fpsma"), ("pwa", "egs")):
        result, timing = timed(partial(simulate, jobs, DAS3, KoalaPolicy.named(approach, policy),
                                       SimConfig(timeline=False)))
        done = sum(1 for r in result.records if r.end is not None)
        grows = sum(1 for op in result.operations if op.kind == "grow")
        shrinks = sum(1 for op in result.operations if op.kind == "shrink")
        line(f"{approach} {policy}", len(jobs), timing,
             f"  {done} done, {grows} grows, {shrinks} shrinks"
             + ("  ok" if timing.wall < 60 else "  SLOW"))


# --------------------------------------------------------------------------- part 3


def shared_bench(given: Path | None) -> Path | None:
    candidates = [given] if given else []
    env = os.environ.get("MALLEABLE_SHARED_BENCH")
    if env:
        candidates.append(Path(env))
    candidates += [ROOT.parent / "shared" / "bench", ROOT.parent.parent / "shared" / "bench",
                   Path("/work/shared/bench")]
    for path in candidates:
        if path is not None and (path / "gen_swf.py").is_file():
            return path
    return None


def make_trace(bench: Path, n_jobs: int, seed: int, workdir: Path) -> Path:
    trace = workdir / f"synth-{n_jobs}-s{seed}.swf"
    if not trace.exists():
        subprocess.run([sys.executable, str(bench / "gen_swf.py"), "-n", str(n_jobs), "-s",
                        str(seed), "-o", str(trace)], check=True, timeout=600)
    return trace


def ensure_accasim(venv: Path, bench: Path) -> Path | None:
    """The venv's python with accasim importable, creating it when missing (None: failed)."""
    python = venv / "bin" / "python"
    probe = [str(python), "-c", "import sys; sys.path.insert(0, sys.argv[1]); import compat, "
             "accasim.base.simulator_class", str(bench / "accasim")]
    if python.exists() and subprocess.run(probe, capture_output=True, timeout=120).returncode == 0:
        return python
    print(f"  creating AccaSim's venv at {venv} (pip install -r accasim/requirements.lock.txt)")
    steps = [[sys.executable, "-m", "venv", str(venv)],
             [str(python), "-m", "pip", "install", "-q", "-r",
              str(bench / "accasim" / "requirements.lock.txt")]]
    for step in steps:
        done = subprocess.run(step, capture_output=True, text=True, timeout=1800)
        if done.returncode != 0:
            tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
            print(f"  SKIPPED AccaSim: `{' '.join(step[:4])} ...` failed: {' | '.join(tail)}")
            return None
    if subprocess.run(probe, capture_output=True, timeout=120).returncode != 0:
        print("  SKIPPED AccaSim: installed, but `import accasim` fails in its venv")
        return None
    return python


def child(argv: list[str], **env: str) -> tuple[subprocess.CompletedProcess[str], Timing]:
    """Run a child process; its wall time and CPU time (user + system)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, timeout=3600,
                          env={**os.environ, "TZ": "UTC", **env})
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return done, Timing(wall, cpu)


def accasim_start_cpu(python: Path, bench: Path) -> float:
    """CPU time AccaSim's process spends starting and importing (subtracted from its run)."""
    _, timing = child([str(python), "-c", "import sys; sys.path.insert(0, sys.argv[1]); "
                       "import compat; from accasim.base.simulator_class import Simulator; "
                       "from accasim.base.scheduler_class import FirstInFirstOut; "
                       "from accasim.base.allocator_class import FirstFit",
                       str(bench / "accasim")])
    return timing.cpu


def run_accasim(python: Path, bench: Path, trace: Path, results: Path,
                sched: bool) -> tuple[dict[str, Any], Timing]:
    argv = [str(python), str(bench / "accasim" / "run_accasim.py"), str(trace), "--policy",
            "fifo", "--results", str(results), "--log-level", "WARNING"]
    if sched:
        argv.append("--sched-output")
    done, timing = child(argv)
    if done.returncode != 0:
        raise RuntimeError(f"AccaSim failed ({done.returncode}): {done.stderr.strip()[-500:]}")
    return json.loads(done.stdout.strip().splitlines()[-1]), timing


def accasim_starts(results: Path, trace: Path) -> dict[str, float]:
    """Job number -> start time (s from the trace's time 0) from AccaSim's dispatching plan.

    A line reads ``id;user;queued__assignations__start;end;nodes;cores;mem;duration;``
    with times as local date-times (AccaSim ran with TZ=UTC).
    """
    starts: dict[str, float] = {}
    for raw in (results / f"sched-{trace.name}").read_text().splitlines():
        if not raw.strip():
            continue
        job_id, rest = raw.split(";", 1)
        stamp = rest.split("__")[2].split(";")[0]
        moment = datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S").replace(tzinfo=UTC)
        starts[job_id] = moment.timestamp() - ACCASIM_EPOCH
    return starts


def compare_starts(ours: dict[str, float], theirs: dict[str, float]) -> tuple[int, list[str]]:
    """How many jobs start at the same second in both, and a few that do not."""
    same, differ = 0, list[str]()
    for job_id in sorted(set(ours) | set(theirs), key=lambda j: int(j)):
        a, b = ours.get(job_id), theirs.get(job_id)
        if a is not None and b is not None and abs(a - b) < 1e-6:
            same += 1
        elif len(differ) < 5:
            differ.append(f"job {job_id}: ours {a}, AccaSim {b}")
    return same, differ


def bench_rigid(n_jobs: int, seed: int, bench: Path | None, venv: Path, workdir: Path,
                use_accasim: bool) -> None:
    print(f"Rigid trace ({n_jobs:,} jobs, gen_swf.py seed {seed}, one 128-node cluster, FIFO "
          "with first fit): target ours >= 10x AccaSim, same start times")
    if bench is None:
        print("  SKIPPED: ../shared/bench/gen_swf.py not found (set MALLEABLE_SHARED_BENCH)")
        return
    trace = make_trace(bench, n_jobs, seed, workdir)

    out = workdir / "ours"
    done, ours = child([sys.executable, "-m", "malleable", "simulate", "--policy", "fcfs",
                        "--platform", "128", "--workload", str(trace), "--json",
                        "--out", str(out)], PYTHONPATH=str(ROOT / "src"))
    if done.returncode != 0:
        print(f"  FAILED: malleable simulate exited {done.returncode}: {done.stderr.strip()}")
        return
    line("ours (malleable simulate --policy fcfs, whole process)", n_jobs, ours)
    if not use_accasim:
        print("  AccaSim skipped (--no-accasim)")
        return
    python = ensure_accasim(venv, bench)
    if python is None:
        return
    summary, acc_proc = run_accasim(python, bench, trace, workdir / "accasim-bench", False)
    acc = Timing(summary["accasim_sim_time_s"],
                 max(1e-9, acc_proc.cpu - accasim_start_cpu(python, bench)))
    line("AccaSim (its simulation loop)", n_jobs, acc)
    line("AccaSim (whole process)", n_jobs, acc_proc)
    ratio_wall = acc.wall / ours.wall
    ratio_cpu = acc.cpu / ours.cpu
    verdict = "met" if min(ratio_wall, ratio_cpu) >= 10 else "NOT met"
    print(f"  ratio ours/AccaSim: {ratio_wall:.1f}x on wall time, {ratio_cpu:.1f}x on CPU time "
          f"(target 10x: {verdict})")
    sched_summary, sched_timing = run_accasim(python, bench, trace, workdir / "accasim-sched",
                                              True)
    line("AccaSim with its dispatching plan", n_jobs, sched_timing)
    theirs = accasim_starts(workdir / "accasim-sched", trace)
    mine = csv_starts(out / "jobs.csv")
    same, differ = compare_starts(mine, theirs)
    total = len(set(mine) | set(theirs))
    print(f"  start times identical for {same:,} of {total:,} jobs: "
          + ("SAME SCHEDULE" if same == total == n_jobs else "DIFFERENT: " + "; ".join(differ)))
    if sched_summary.get("finished_jobs") != n_jobs:
        print(f"  note: AccaSim finished {sched_summary.get('finished_jobs')} jobs")


def csv_starts(path: Path) -> dict[str, float]:
    """Start times by job id from a ``jobs.csv`` of ``malleable simulate``."""
    with path.open(newline="") as handle:
        return {row["job"]: float(row["start"]) for row in csv.DictReader(handle)
                if row["start"] not in ("", "nan")}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="10,000 jobs instead of 100,000 for the large runs")
    parser.add_argument("--jobs", type=int, help="jobs in the large runs (overrides --quick)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--no-accasim", dest="accasim", action="store_false",
                        help="do not run AccaSim (ours only)")
    parser.add_argument("--accasim-venv", type=Path, default=ROOT / ".venv-accasim",
                        help="AccaSim's virtual environment (created when missing)")
    parser.add_argument("--shared-bench", type=Path,
                        help="the shared bench folder with gen_swf.py and accasim/")
    parser.add_argument("--workdir", type=Path,
                        help="where traces and AccaSim results go (default: a temp folder)")
    parser.add_argument("--only", choices=["koala", "large", "rigid"], action="append",
                        help="run only these parts (repeatable)")
    args = parser.parse_args(argv)
    n_jobs = args.jobs or (10_000 if args.quick else 100_000)
    parts = set(args.only or ["koala", "large", "rigid"])
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cores, load average "
          f"{os.getloadavg()[0]:.2f}")
    if "koala" in parts:
        bench_koala(args.seed)
    if "large" in parts:
        bench_large(n_jobs, args.seed)
    if "rigid" in parts:
        with tempfile.TemporaryDirectory(prefix="malleable-bench-") as tmp:
            workdir = args.workdir or Path(tmp)
            workdir.mkdir(parents=True, exist_ok=True)
            bench_rigid(n_jobs, args.seed, shared_bench(args.shared_bench), args.accasim_venv,
                        workdir, args.accasim)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
