#!/usr/bin/env python3
"""Simulator speed (issue 17): ours beside AccaSim and a SimPy FIFO, as one table.

    python3 benchmarks/bench_sim.py                           # 10k and 100k rows
    python3 benchmarks/bench_sim.py --sizes 10000,100000,1000000 --repeat 3
    python3 benchmarks/bench_sim.py --quick                   # 10k rows only
    python3 benchmarks/bench_sim.py --no-accasim --no-simpy   # ours only
    python3 benchmarks/bench_sim.py --compiled                # + the compiled build's rows

Every row runs each simulator as its own process and reports the CPU time (user +
system) and the peak RSS of that whole process, the minimum of ``--repeat`` runs, taken
in turn (ours, peer, ours, peer...) on the same trace. Ours runs from a copy of ``src/``
with its bytecode written, as ``pip install`` leaves it (benchmarks/compiled.py); AccaSim
runs installed in its environment:

* ``FIFO first fit``: ``malleable simulate --policy fcfs --platform 128 --workload
  TRACE --json`` beside AccaSim 1.1.3 (FIFO + first fit, per-job output off), the
  ratio (target >= 30x at 100k);
* ``FIFO first fit, per-job output``: the same with per-job output on both sides (ours
  ``--out``: jobs.csv; AccaSim ``--sched-output``: its dispatching plan, up to
  ``--accasim-starts-max`` jobs). The start times of every job in the two are compared
  (on the row above) and with the SimPy FIFO's. Each side's setting is matched: AccaSim's
  per-job output about doubles its time (../shared/bench/README.md);
* ``FIFO first fit, jobs.csv vs AccaSim summary``: the issue 36 target row, from the
  runs above: ours writing ``jobs.csv`` (as a user runs ``simulate --out``) against
  AccaSim with its per-job output off (its fastest setting; target >= 30x at 100k FIFO,
  >= 10x EASY, with the README's install: the compiled build);
* ``FIFO vs SimPy``: the same run of ours beside ``simpy_fifo.py`` (a strict FIFO in
  SimPy, no manager, no policy object: the floor of a Python simulator);
* ``EASY``: ``--policy easy`` beside AccaSim's EASY backfilling (target >= 10x at
  100k; AccaSim's EASY is not textbook EASY, so compare throughput, not schedules), and,
  from the per-job output row, the start times of every job compared with the
  independent reference of ``tests/sim/test_easy_reference.py`` (up to
  ``--reference-max`` jobs);
* ``wm-prime``: the KOALA mix (all malleable, FT and GADGET-2) written as an SWF file,
  run by ``simulate`` on the five DAS-3 clusters under PWA/EGS and PRA/FPSMA
  (target < 5 s at 100k);
* ``KOALA 300``: the eight 300-job KOALA runs of the paper, in this process (target <
  0.1 s each).

With ``--compiled``, the compiled build (setup.py, made by ``benchmarks/compiled.py`` in
the work folder first) runs every row of ours too, in turn with the source run, and its
row says whether its output equals the source run's (the same code, compiled: it must).

Traces come from ``../shared/bench/gen_swf.py`` (seeded). AccaSim lives in its own
virtual environment (``--accasim-venv``, default ``.venv-accasim`` at the repository
root, gitignored), created from the shared lock file when missing, with ``simpy`` added;
when pip cannot install them, those columns say so. The figures at several sizes show
how the cost per job grows.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT))

from benchmarks import compiled  # noqa: E402
from malleable.model import DAS3  # noqa: E402
from malleable.policies.koala import KoalaPolicy  # noqa: E402
from malleable.sim.run import simulate  # noqa: E402
from malleable.workloads.koala import koala_workload  # noqa: E402
from malleable.workloads.swf import write_swf  # noqa: E402

#: AccaSim's system start time (the ``start_time`` of the shared sys-128x1.json).
ACCASIM_EPOCH = 1_000_000_000
KIB = 1024


@dataclass
class Run:
    """One process: CPU time (user + system), peak RSS, its output."""

    cpu: float
    rss_kib: int
    stdout: str = ""

    @property
    def rss_mib(self) -> float:
        return self.rss_kib / KIB


@dataclass
class Row:
    label: str
    jobs: int
    ours: Run | None
    peer_name: str = ""
    peer: Run | None = None
    check: str = ""
    notes: list[str] = field(default_factory=list)


def child(argv: list[str], **env: str) -> Run:
    """Run ``argv`` to its end; its own CPU time and peak RSS (wait4), RuntimeError on failure."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen(argv, stdout=out, stderr=err,
                                env={**os.environ, "TZ": "UTC", **env})
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        if proc.returncode != 0:
            raise RuntimeError(f"{' '.join(argv[:6])} ... exited {proc.returncode}: "
                               f"{err.read().strip()[-400:]}")
        return Run(usage.ru_utime + usage.ru_stime, usage.ru_maxrss, out.read())


def best_of(repeat: int, *makers: Callable[[], Run] | None) -> list[Run | None]:
    """Each maker run ``repeat`` times in turn; the run with the least CPU of each."""
    best: list[Run | None] = [None] * len(makers)
    for _ in range(repeat):
        for i, make in enumerate(makers):
            if make is None:
                continue
            run = make()
            current = best[i]
            if current is None or run.cpu < current.cpu:
                best[i] = run
    return best


def ours_argv(policy: str, trace: Path, platform: str = "128", out: Path | None = None,
              *extra: str) -> list[str]:
    argv = [sys.executable, "-m", "malleable", "simulate", "--policy", policy, "--platform",
            platform, "--workload", str(trace), "--json", *extra]
    # jobs.csv only: the run's figures (simulate.md, "Figures") are not what is timed
    return argv + (["--out", str(out), "--no-figures"] if out is not None else [])


def ours(policy: str, trace: Path, platform: str = "128", out: Path | None = None,
         *extra: str, src: Path | None = None) -> Callable[[], Run]:
    where = src or SOURCE
    argv = ours_argv(policy, trace, platform, out, *extra)
    if not draws_figures(where):  # an older tree (the baseline): no --no-figures
        argv = [a for a in argv if a != "--no-figures"]
    return lambda: child(argv, PYTHONPATH=str(where))


def draws_figures(src: Path) -> bool:
    """Whether the tree's ``simulate --out`` draws figures (and so takes ``--no-figures``):
    trees before it did (the issue 36 baseline 5ad7fe8) write jobs.csv and summary.json
    only."""
    command = src / "malleable" / "commands" / "simulate.py"
    return not command.is_file() or "--no-figures" in command.read_text()


#: The plain sources the source runs use: a copy of ``src/`` with its bytecode, made by
#: ``main`` (benchmarks/compiled.py, :func:`~benchmarks.compiled.source`).
SOURCE: Path = ROOT / "src"


#: The compiled build's sources (``--compiled``), or None.
COMPILED: Path | None = None

#: Another tree's plain sources (``--baseline``: main's, say), with their bytecode, or None.
BASELINE: Path | None = None


def compiled_twin(label: str, n_jobs: int, run: Run | None, source: Run | None,
                  same: bool | None, peer_name: str = "", peer: Run | None = None) -> Row:
    """The compiled build's row beside the source run's: its CPU against the source's, and
    whether its output is the same."""
    ratio = f"{run.cpu / source.cpu:.3f} of the source run's CPU" if run and source else ""
    verdict = "output SAME as the source run" if same else "output DIFFERENT from the " \
        "source run" if same is not None else "output not compared"
    return Row(f"{label} [compiled]", n_jobs, run, peer_name, peer, f"{ratio}; {verdict}")


def same_files(a: Path, b: Path) -> bool:
    return a.read_bytes() == b.read_bytes()


def same_summary(ours: Path, base: Path) -> str:
    """summary.json of ours against the baseline's: byte-identical, or the same values for
    every key the baseline has (a later tree adds keys: issue 36's counts of a log's rules)."""
    if same_files(ours / "summary.json", base / "summary.json"):
        return "summary.json SAME"
    mine, theirs = (json.loads((d / "summary.json").read_text()) for d in (ours, base))
    differ = sorted(k for k in theirs if mine.get(k) != theirs[k])
    added = sorted(set(mine) - set(theirs))
    return (f"summary.json DIFFERENT in {', '.join(differ)}" if differ else
            f"summary.json SAME on the baseline's {len(theirs)} keys (ours adds "
            f"{', '.join(added)})")


# --------------------------------------------------------------------------- KOALA 300


def koala_rows(seed: int) -> list[Row]:
    """The eight 300-job KOALA runs, in this process (CPU time of the simulation)."""
    rows = []
    for workload, approach in (("wm", "pra"), ("wmr", "pra"), ("wm-prime", "pwa"),
                               ("wmr-prime", "pwa")):
        for policy in ("fpsma", "egs"):
            jobs = koala_workload(workload, seed)
            begin = time.process_time()
            simulate(jobs, DAS3, KoalaPolicy.named(approach, policy))
            cpu = time.process_time() - begin
            print(f"  {workload} {approach} {policy}: {len(jobs)} jobs in {cpu:.3f} s cpu, "
                  f"{len(jobs) / max(cpu, 1e-9):,.0f} jobs/s")
            rows.append(Row(f"KOALA {workload} {approach}/{policy}", len(jobs), Run(cpu, 0),
                            check="ok (< 0.1 s)" if cpu < 0.1 else "SLOW (>= 0.1 s)"))
    return rows


def malleable_rows(n_jobs: int, seed: int, workdir: Path, repeat: int) -> list[Row]:
    """wm-prime (all malleable) with ``n_jobs`` jobs on DAS-3, as ``simulate`` runs it."""
    trace = workdir / f"wm-prime-{n_jobs}-s{seed}.swf"
    if not trace.exists():
        write_swf(trace, koala_workload("wm-prime", seed, jobs=n_jobs), "bench_sim wm-prime")
    rows = []
    for approach, policy in (("pwa", "egs"), ("pra", "fpsma")):
        run, comp = best_of(repeat, ours(policy, trace, "das3", None, "--approach", approach),
                            ours(policy, trace, "das3", None, "--approach", approach,
                                 src=COMPILED) if COMPILED else None)
        assert run is not None
        summary = json.loads(run.stdout)
        ok = ("ok (< 5 s)" if run.cpu < 5 else "SLOW (>= 5 s)") if n_jobs == 100_000 \
            else "(the 5 s target is at 100k)"
        label = f"wm-prime DAS-3 {approach}/{policy}"
        rows.append(Row(label, n_jobs, run,
                        check=f"{ok}; {summary['completed']} done, {summary['grow_ops']} "
                              f"grows, {summary['shrink_ops']} shrinks"))
        if COMPILED:
            twin = compiled_twin(label, n_jobs, comp, run,
                                 comp is not None and comp.stdout == run.stdout)
            if comp is not None and n_jobs == 100_000:
                twin.check = ("ok (< 5 s)" if comp.cpu < 5 else "SLOW (>= 5 s)") + "; " + \
                    twin.check
            rows.append(twin)
    return rows


# --------------------------------------------------------------------------- peers


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
                        str(seed), "-o", str(trace)], check=True, timeout=1800,
                       capture_output=True)
    return trace


def ensure_venv(venv: Path, bench: Path) -> tuple[Path | None, str]:
    """The venv's python with AccaSim and SimPy importable, made when missing; else why not."""
    python = venv / "bin" / "python"
    probe = [str(python), "-c", "import sys; sys.path.insert(0, sys.argv[1]); import compat, "
             "accasim.base.simulator_class, simpy", str(bench / "accasim")]
    if python.exists() and subprocess.run(probe, capture_output=True, timeout=120).returncode == 0:
        return python, ""
    print(f"  creating {venv} (pip install -r accasim/requirements.lock.txt simpy)")
    steps = [[sys.executable, "-m", "venv", str(venv)],
             [str(python), "-m", "pip", "install", "-q", "-r",
              str(bench / "accasim" / "requirements.lock.txt"), "simpy"]]
    for step in steps:
        done = subprocess.run(step, capture_output=True, text=True, timeout=1800)
        if done.returncode != 0:
            tail = (done.stderr or done.stdout).strip().splitlines()[-2:]
            return None, f"`{' '.join(step[:4])} ...` failed: {' | '.join(tail)}"
    if subprocess.run(probe, capture_output=True, timeout=120).returncode != 0:
        return None, "installed, but `import accasim, simpy` fails in its venv"
    return python, ""


def ensure_accasim(venv: Path, bench: Path) -> Path | None:
    """:func:`ensure_venv`, saying why AccaSim is skipped when it cannot be had."""
    python, problem = ensure_venv(venv, bench)
    if python is None:
        print(f"  SKIPPED AccaSim: {problem}")
    return python


def accasim(python: Path, bench: Path, trace: Path, policy: str, results: Path,
            sched: bool = False) -> Callable[[], Run]:
    argv = [str(python), str(bench / "accasim" / "run_accasim.py"), str(trace), "--policy",
            policy, "--results", str(results), "--log-level", "WARNING"]
    return lambda: child(argv + (["--sched-output"] if sched else []))


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


def csv_starts(path: Path) -> dict[str, float]:
    """Start times by job id from a ``jobs.csv`` of ``malleable simulate``."""
    with path.open(newline="") as handle:
        return {row["job"]: float(row["start"]) for row in csv.DictReader(handle)
                if row["start"] not in ("", "nan")}


def pair_starts(path: Path) -> dict[str, float]:
    """Start times from ``job,start`` lines (simpy_fifo.py --starts)."""
    pairs = (line.split(",") for line in path.read_text().splitlines() if line)
    return {job: float(start) for job, start in pairs}


def compare_starts(ours: dict[str, float], theirs: dict[str, float],
                   name: str = "AccaSim") -> tuple[int, list[str]]:
    """How many jobs start at the same second in both, and a few that do not."""
    same, differ = 0, list[str]()
    for job_id in sorted(set(ours) | set(theirs), key=int):
        a, b = ours.get(job_id), theirs.get(job_id)
        if a is not None and b is not None and abs(a - b) < 1e-6:
            same += 1
        elif len(differ) < 5:
            differ.append(f"job {job_id}: ours {a}, {name} {b}")
    return same, differ


def same_starts(ours: dict[str, float], theirs: dict[str, float], name: str,
                n_jobs: int) -> str:
    """'identical for N of N jobs' or where they first differ."""
    same, differ = compare_starts(ours, theirs, name)
    verdict = "SAME" if same == n_jobs == len(ours) == len(theirs) else "DIFFERENT: " + \
        "; ".join(differ)
    return f"starts vs {name}: {same:,}/{n_jobs:,} identical ({verdict})"


def reference_easy_starts(trace: Path) -> dict[str, float]:
    """The independent EASY of tests/sim/test_easy_reference.py on an SWF trace."""
    from tests.sim.test_easy_reference import Rigid, reference_easy

    jobs = []
    for line in trace.read_text().splitlines():
        f = line.split()
        if not f or f[0].startswith(";"):
            continue
        size = int(f[7]) if int(f[7]) > 0 else int(f[4])
        jobs.append(Rigid(f[0], float(f[1]), size, float(f[3]), float(f[8])))
    return reference_easy(jobs, 128)


# --------------------------------------------------------------------------- rigid rows


@dataclass
class Setup:
    bench: Path
    workdir: Path
    repeat: int
    venv: Path | None
    venv_problem: str
    accasim_starts_max: int
    reference_max: int
    use_accasim: bool
    use_simpy: bool


def rigid_pairs(policy: str, peer_policy: str, n_jobs: int, trace: Path, setup: Setup,
                label: str) -> tuple[list[Row], Path, bool]:
    """The two timed pairs of a rigid policy, each with the same output setting on both
    sides (../shared/bench/README.md: AccaSim's per-job output roughly doubles its time):

    * ``label``: the summary only (ours ``--json``; AccaSim per-job output off, its
      statistics on), the figure the targets are about;
    * ``label, per-job output``: ours also writes ``jobs.csv`` (``--out``), AccaSim its
      dispatching plan (``--sched-output``); these outputs are the ones the start-time
      checks read.

    With ``--compiled``, a compiled twin follows each row (its output compared with the
    source run's). Returns the rows, ours ``jobs.csv`` and whether AccaSim ran."""
    python = setup.venv if setup.use_accasim else None
    plain = setup.workdir / f"acc-{peer_policy}-{n_jobs}"
    planned = setup.workdir / f"acc-{peer_policy}-sched-{n_jobs}"
    out = setup.workdir / f"ours-{policy}-{n_jobs}"
    twin = setup.workdir / f"ours-{policy}-{n_jobs}-compiled"
    peer_name = f"AccaSim 1.1.3 {peer_policy.upper()}"
    mine, theirs, comp = best_of(
        setup.repeat, ours(policy, trace, "128"),
        accasim(python, setup.bench, trace, peer_policy, plain) if python else None,
        ours(policy, trace, "128", src=COMPILED) if COMPILED else None)
    assert mine is not None
    print(f"  ours (malleable simulate --policy {policy}, whole process): {n_jobs:,} jobs, "
          f"cpu {mine.cpu:.3f} s" + ("" if python else "; AccaSim skipped "
                                      f"({setup.venv_problem or '--no-accasim'})"))
    rows = [Row(label, n_jobs, mine, peer_name, theirs)]
    if COMPILED:
        rows.append(compiled_twin(label, n_jobs, comp, mine,
                                  comp is not None and comp.stdout == mine.stdout,
                                  peer_name, theirs))
    wide = python is not None and n_jobs <= setup.accasim_starts_max
    base_out = setup.workdir / f"baseline-{policy}-{n_jobs}"
    mine_out, theirs_out, comp_out, base = best_of(
        setup.repeat, ours(policy, trace, "128", out),
        accasim(python, setup.bench, trace, peer_policy, planned, sched=True)
        if python is not None and wide else None,
        ours(policy, trace, "128", twin, src=COMPILED) if COMPILED else None,
        ours(policy, trace, "128", base_out, src=BASELINE) if BASELINE else None)
    label_out = f"{label}, per-job output"
    rows.append(Row(label_out, n_jobs, mine_out, peer_name if theirs_out else "", theirs_out,
                    "ours writes jobs.csv" + (", AccaSim its dispatching plan; the start "
                                              "check above reads them" if theirs_out else "")))
    if COMPILED:
        rows.append(compiled_twin(label_out, n_jobs, comp_out, mine_out,
                                  same_files(out / "jobs.csv", twin / "jobs.csv"),
                                  peer_name if theirs_out else "", theirs_out))
    if BASELINE and base is not None:
        # the issue 36 pure-build target: this tree's source run against the baseline
        # tree's (main's), both writing jobs.csv, taken in turn in the same loop
        same = same_files(out / "jobs.csv", base_out / "jobs.csv")
        rows.append(Row(f"{label_out} vs baseline tree", n_jobs, mine_out, "baseline tree",
                        base, f"{base.cpu / mine_out.cpu:.2f}x the baseline's speed "
                        f"(target >= 2x); jobs.csv {'SAME' if same else 'DIFFERENT'} as the "
                        f"baseline's; {same_summary(out, base_out)}" if mine_out else ""))
    # the issue 36 targets: ours as a user runs it (jobs.csv written) against AccaSim's
    # summary-only time (the same runs as above, paired differently)
    label_target = f"{label}, jobs.csv vs AccaSim summary"
    rows.append(Row(label_target, n_jobs, mine_out, peer_name if theirs else "", theirs,
                    "ours writes jobs.csv; AccaSim per-job output off (issue 36 target)"))
    if COMPILED:
        rows.append(compiled_twin(label_target, n_jobs, comp_out, mine_out,
                                  same_files(out / "jobs.csv", twin / "jobs.csv"),
                                  peer_name if theirs else "", theirs))
    return rows, out / "jobs.csv", theirs_out is not None


def fifo_rows(n_jobs: int, trace: Path, setup: Setup) -> list[Row]:
    rows, jobs_csv, planned = rigid_pairs("fcfs", "fifo", n_jobs, trace, setup,
                                          "FIFO first fit")
    starts = csv_starts(jobs_csv)
    if planned:
        results = setup.workdir / f"acc-fifo-sched-{n_jobs}"
        rows[0].check = same_starts(starts, accasim_starts(results, trace), "AccaSim", n_jobs)
    elif setup.venv is not None and setup.use_accasim:
        rows[0].check = f"(AccaSim's plan not compared above {setup.accasim_starts_max:,} jobs)"
    else:
        rows[0].check = f"AccaSim not run: {setup.venv_problem or '--no-accasim'}"
    if setup.use_simpy and setup.venv is not None:
        starts_file = setup.workdir / f"simpy-{n_jobs}.csv"
        simpy = [str(setup.venv), str(ROOT / "benchmarks" / "simpy_fifo.py"), str(trace),
                 "--starts", str(starts_file)]
        mine, theirs = best_of(setup.repeat, ours("fcfs", trace), lambda: child(simpy))
        rows.append(Row("FIFO vs SimPy", n_jobs, mine, "SimPy 40-line FIFO", theirs,
                        same_starts(starts, pair_starts(starts_file), "SimPy", n_jobs)))
    return rows


def easy_rows(n_jobs: int, trace: Path, setup: Setup) -> list[Row]:
    rows, jobs_csv, _ = rigid_pairs("easy", "easy", n_jobs, trace, setup, "EASY backfilling")
    if n_jobs <= setup.reference_max:
        rows[0].check = same_starts(csv_starts(jobs_csv), reference_easy_starts(trace),
                                    "textbook reference", n_jobs)
    else:
        rows[0].check = f"(reference not run above {setup.reference_max:,} jobs)"
    if rows[0].peer is not None:
        rows[0].notes.append("AccaSim's EASY is not textbook EASY: throughput only")
    return rows


def big_fifo_rows(n_jobs: int, trace: Path, setup: Setup) -> list[Row]:
    """FCFS on a big trace (``--big``: 1M), ours only, writing ``jobs.csv`` as a user runs
    it: the issue 36 target (< 15 s, < 400 MiB with the README's install, the compiled
    build). No AccaSim (hours at 1M)."""
    out = setup.workdir / f"ours-fcfs-big-{n_jobs}"
    twin = setup.workdir / f"ours-fcfs-big-{n_jobs}-compiled"
    mine, comp = best_of(setup.repeat, ours("fcfs", trace, "128", out),
                         ours("fcfs", trace, "128", twin, src=COMPILED) if COMPILED else None)
    assert mine is not None

    def verdict(run: Run) -> str:
        ok = run.cpu < 15 and run.rss_mib < 400
        return f"{'ok' if ok else 'NOT MET'} (target < 15 s and < 400 MiB)"

    label = "FIFO first fit, jobs.csv"
    rows = [Row(label, n_jobs, mine, check=verdict(mine))]
    if COMPILED:
        twin_row = compiled_twin(label, n_jobs, comp, mine,
                                 same_files(out / "jobs.csv", twin / "jobs.csv"))
        if comp is not None:
            twin_row.check = f"{verdict(comp)}; {twin_row.check}"
        rows.append(twin_row)
    return rows


def real_log_rows(log: Path, policy: str, setup: Setup) -> list[Row]:
    """A real log (``--real-log``: RICC 2010) run as it is, on the platform its header
    describes (no ``--platform``), writing ``jobs.csv``: the issue 36 target (< 30 s with
    the README's install, the compiled build, for RICC under EASY)."""

    def run(out: Path, src: Path | None) -> Callable[[], Run]:
        argv = [sys.executable, "-m", "malleable", "simulate", "--policy", policy,
                "--workload", str(log), "--json", "--out", str(out), "--no-figures"]
        return lambda: child(argv, PYTHONPATH=str(src or SOURCE))

    out = setup.workdir / f"real-{policy}"
    twin = setup.workdir / f"real-{policy}-compiled"
    mine, comp = best_of(setup.repeat, run(out, None),
                         run(twin, COMPILED) if COMPILED else None)
    assert mine is not None
    n_jobs = json.loads(mine.stdout).get("jobs", 0)
    label = f"{log.name.split('.')[0]} {policy}, header platform"
    rows = [Row(label, n_jobs, mine, check=f"{n_jobs / mine.cpu:,.0f} jobs/s; "
                f"{'ok' if mine.cpu < 30 else 'NOT MET'} (target < 30 s)")]
    if COMPILED and comp is not None:
        twin_row = compiled_twin(label, n_jobs, comp, mine,
                                 same_files(out / "jobs.csv", twin / "jobs.csv"))
        twin_row.check = (f"{n_jobs / comp.cpu:,.0f} jobs/s; "
                          f"{'ok' if comp.cpu < 30 else 'NOT MET'} (target < 30 s); "
                          + twin_row.check)
        rows.append(twin_row)
    return rows


# --------------------------------------------------------------------------- report


def print_table(rows: list[Row]) -> None:
    print(f"| {'run':<34} | {'#jobs':>9} | {'ours CPU s':>10} | {'us/job':>6} | "
          f"{'RSS MiB':>7} | {'peer':<20} | {'peer CPU s':>10} | {'ratio':>7} | check")
    print("|" + "|".join("-" * w for w in (36, 11, 12, 8, 9, 22, 12, 9, 7)) + "|")
    for row in rows:
        mine = row.ours
        cpu = f"{mine.cpu:10.3f}" if mine else f"{'-':>10}"
        per_job = f"{mine.cpu / row.jobs * 1e6:6.1f}" if mine else f"{'-':>6}"
        rss = f"{mine.rss_mib:7.0f}" if mine and mine.rss_kib else f"{'-':>7}"
        peer_cpu = f"{row.peer.cpu:10.3f}" if row.peer else f"{'-':>10}"
        ratio = (f"{row.peer.cpu / mine.cpu:6.2f}x" if row.peer and mine and mine.cpu > 0
                 else f"{'-':>7}")
        peer_rss = f" (peer RSS {row.peer.rss_mib:.0f} MiB)" if row.peer else ""
        notes = "".join(f"; {n}" for n in row.notes)
        print(f"| {row.label:<34} | {row.jobs:>9,} | {cpu} | {per_job} | {rss} | "
              f"{row.peer_name or '-':<20} | {peer_cpu} | {ratio} | {row.check}{peer_rss}{notes}")
    print("ratio = peer CPU / ours CPU (whole processes; above 1: ours is faster)")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000",
                        help="comma-separated trace sizes (default 10000,100000)")
    parser.add_argument("--quick", action="store_true", help="10,000 jobs only")
    parser.add_argument("--jobs", type=int, help="one size only (overrides --sizes)")
    parser.add_argument("--repeat", type=int, default=1, help="runs of each, the least CPU kept")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--no-accasim", dest="accasim", action="store_false")
    parser.add_argument("--no-simpy", dest="simpy", action="store_false")
    parser.add_argument("--accasim-venv", type=Path, default=ROOT / ".venv-accasim",
                        help="AccaSim's (and SimPy's) virtual environment (made when missing)")
    parser.add_argument("--accasim-starts-max", type=int, default=100_000,
                        help="run AccaSim with its dispatching plan (per-job output) and "
                             "compare FIFO's start times with it up to this size")
    parser.add_argument("--reference-max", type=int, default=100_000,
                        help="compare EASY with the reference up to this size")
    parser.add_argument("--shared-bench", type=Path,
                        help="the shared bench folder with gen_swf.py and accasim/")
    parser.add_argument("--workdir", type=Path, help="traces and outputs (default: temporary)")
    parser.add_argument("--compiled", action="store_true",
                        help="also run the compiled build (setup.py; built first, ~35 s)")
    parser.add_argument("--baseline", type=Path,
                        help="another checkout (main's worktree, say): its plain sources run "
                             "the per-job output rows too, in turn with ours, and the row "
                             "'... vs baseline tree' compares the two (CPU and outputs)")
    parser.add_argument("--big", type=int, metavar="N",
                        help="also FCFS on an N-job trace (1000000: the issue 36 1M target), "
                             "ours only, jobs.csv written")
    parser.add_argument("--real-log", type=Path, metavar="SWF",
                        help="also run this real log (../shared/traces/RICC-2010-2.swf.gz) "
                             "on its header's platform, jobs.csv written")
    parser.add_argument("--real-policy", default="easy", help="the --real-log row's policy")
    parser.add_argument("--only", choices=["koala", "fifo", "easy", "rigid", "malleable"],
                        action="append", help="run only these rows (repeatable; rigid: fifo "
                                              "and easy)")
    args = parser.parse_args(argv)
    sizes = ([args.jobs] if args.jobs else [10_000] if args.quick
             else [int(n) for n in args.sizes.split(",")])
    parts = set(args.only or ["koala", "fifo", "easy", "malleable"])
    if "rigid" in parts:
        parts |= {"fifo", "easy"}
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cores, load average "
          f"{os.getloadavg()[0]:.2f}, min CPU of {args.repeat} run(s) each")
    bench = shared_bench(args.shared_bench)
    with tempfile.TemporaryDirectory(prefix="malleable-bench-") as tmp:
        workdir = args.workdir or Path(tmp)
        workdir.mkdir(parents=True, exist_ok=True)
        global SOURCE, COMPILED, BASELINE
        if parts - {"koala"} or args.big or args.real_log:  # KOALA's run in this process
            SOURCE = compiled.source(workdir / "source")
            if args.baseline is not None:
                BASELINE = compiled.source(workdir / "baseline", args.baseline.resolve())
        if args.compiled:
            print("  building the compiled build (benchmarks/compiled.py) ...", flush=True)
            COMPILED = compiled.build(workdir / "compiled") / "src"
        rows = koala_rows(args.seed) if "koala" in parts else []
        venv, problem = (ensure_venv(args.accasim_venv, bench) if bench is not None
                         and (args.accasim or args.simpy) else (None, "--no-accasim"))
        if venv is None and problem != "--no-accasim":
            print(f"  SKIPPED AccaSim and SimPy: {problem}")
        if bench is None:
            print("  no ../shared/bench/gen_swf.py (set MALLEABLE_SHARED_BENCH): rigid rows "
                  "skipped")
        for n_jobs in sizes if parts - {"koala"} else []:
            if bench is not None and parts & {"fifo", "easy"}:
                trace = make_trace(bench, n_jobs, args.seed, workdir)
                setup = Setup(bench, workdir, args.repeat, venv, problem,
                              args.accasim_starts_max, args.reference_max, args.accasim,
                              args.simpy)
                if "fifo" in parts:
                    rows += fifo_rows(n_jobs, trace, setup)
                if "easy" in parts:
                    rows += easy_rows(n_jobs, trace, setup)
            if "malleable" in parts:
                rows += malleable_rows(n_jobs, args.seed, workdir, args.repeat)
            print(f"  done with {n_jobs:,}", flush=True)
        setup = Setup(bench or ROOT, workdir, args.repeat, venv, problem,
                      args.accasim_starts_max, args.reference_max, args.accasim, args.simpy)
        if args.big and bench is not None:
            rows += big_fifo_rows(args.big, make_trace(bench, args.big, args.seed, workdir),
                                  setup)
        if args.real_log is not None:
            rows += real_log_rows(args.real_log.resolve(), args.real_policy, setup)
        print_table(rows)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
