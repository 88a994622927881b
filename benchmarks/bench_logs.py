#!/usr/bin/env python3
"""Jobs per second on the four real logs of ``../shared/traces/`` (issue 36), beside AccaSim.

    python3 benchmarks/bench_logs.py                      # ours: FCFS, EASY, easy-dmr
    python3 benchmarks/bench_logs.py --accasim            # + AccaSim FIFO and EASY, and checks
    python3 benchmarks/bench_logs.py --logs theta_2022 --accasim --timeout 900

What it times: ``malleable simulate --policy P --workload LOG.swf.gz --out DIR
--no-figures`` (jobs.csv and summary.json written; AccaSim draws no figures either), as its
own process, CPU time (user + system) and peak RSS of the whole process, once, on the
platform the log's header describes (no ``--platform``: MaxNodes nodes, job sizes in
processors rounded up to whole nodes; MaxProcs one-processor nodes when most jobs are not
whole nodes, as RICC's), from a copy of ``src/`` with its bytecode (benchmarks/compiled.py;
``--tree`` runs another tree, e.g. a compiled build's).

With ``--accasim`` (AccaSim) and/or ``--reference`` (the EASY check), on each log also,
with processors taken as nodes on both sides (``--platform MaxProcs``; AccaSim a system of
one node of MaxProcs cores, where its first fit places as many one-core units of a job as
fit: the same starts as MaxProcs one-core nodes, and much faster for it on 4,360-9,216
cores): AccaSim 1.1.3's FIFO and EASY (per-job output on: its dispatching plan is
compared), ours FCFS and EASY, and
* the FCFS start times of every job compared with AccaSim's FIFO;
* the EASY start times of every job compared with the independent textbook EASY of
  tests/sim/test_easy_reference.py (AccaSim's EASY is a speed anchor only: it does not
  protect the head job's reservation).
AccaSim reads a plain file: each log is decompressed into the work folder first. AccaSim
runs are bounded by ``--timeout`` seconds each (a row says when one ran out). ``--no-easy``
leaves the EASY pair out (FCFS/FIFO only). ``--zero-as-one`` also compares FCFS with
AccaSim's FIFO on a copy of each log whose run times of 0 are 1 s (both sides read it):
AccaSim frees a job's cores at its end event, and a job that ends at the instant it
starts has its end handled at the next event time (the next submit or end), however late.
At the end, a table of the FCFS rows (docs/simulate.md, "Real logs: jobs per second").
Timing on a shared machine is noisy: quote the load with the figures.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "src"))
sys.path.insert(0, str(ROOT))

from benchmarks import compiled  # noqa: E402
from benchmarks.bench_sim import (  # noqa: E402
    ACCASIM_EPOCH,
    Run,
    accasim_starts,
    child,
    csv_starts,
    ensure_venv,
    same_starts,
)
from malleable.workloads.swf_log import LogHeader, submit_shift  # noqa: E402

LOGS = ("DAS2-fs1-2003-1", "LLNL-Atlas-2006-2.1-cln", "RICC-2010-2", "theta_2022")
#: our policies timed on each log: (label, simulate's arguments)
POLICIES = (("FCFS", ["--policy", "fcfs"]), ("EASY", ["--policy", "easy"]),
            ("easy-dmr (malleable; rigid jobs here)", ["--policy", "easy-dmr"]))


def traces_dir() -> Path | None:
    """``shared/traces`` beside the checkout (../shared/traces), or None."""
    for base in (ROOT.parent, ROOT.parent.parent):
        folder = base / "shared" / "traces"
        if folder.is_dir():
            return folder
    return None


def ours(src: Path, log: Path, out: Path, extra: list[str]) -> Run:
    argv = [sys.executable, "-m", "malleable", "simulate", "--workload", str(log),
            "--out", str(out), "--no-figures", "--json", *extra]
    return child(argv, PYTHONPATH=str(src))


def plain_copy(log: Path, work: Path) -> tuple[Path, LogHeader, float]:
    """The log decompressed (for AccaSim), its header and our submit shift."""
    plain = work / log.name.removesuffix(".gz")
    with gzip.open(log, "rb") as source, plain.open("wb") as target:
        shutil.copyfileobj(source, target)
    header_lines, first = [], None
    with plain.open() as handle:
        for line in handle:
            if line.lstrip().startswith(";"):
                header_lines.append(line.strip())
            elif line.strip():
                first = float(line.split()[1])
                break
    header = LogHeader.of(header_lines)
    return plain, header, submit_shift(header, first or 0.0)


def accasim_system(cores: int) -> dict[str, object]:
    """AccaSim's system config: one node of ``cores`` one-core processors (its reader takes
    a job's processors as that many one-core units, and its first fit puts as many of them
    on a node as fit: a job starts when ``cores`` less those in use are enough, as on
    ``--platform cores``)."""
    return {"system_name": f"log-1x{cores}", "start_time": ACCASIM_EPOCH,
            "equivalence": {"processor": {"core": 1}}, "groups": {"g0": {"core": cores}},
            "resources": {"g0": 1}}


def accasim_run(python: Path, bench: Path, plain: Path, policy: str, cores: int,
                results: Path, timeout: float) -> Run | str:
    config = results.parent / f"sys-1x{cores}.json"
    config.write_text(json.dumps(accasim_system(cores)))
    argv = ["timeout", str(int(timeout)), str(python), str(bench / "accasim" / "run_accasim.py"),
            str(plain), "--policy", policy, "--results", str(results), "--log-level", "ERROR",
            "--sys-config", str(config), "--sched-output"]
    try:
        return child(argv)
    except RuntimeError as exc:
        return f"AccaSim did not finish: {exc}"[:200]


def zero_as_one(plain: Path) -> Path:
    """A copy of a plain log whose run times (field 4) of 0 are 1 s."""
    copy = plain.with_name(plain.stem + "-zero-as-one.swf")
    with plain.open() as source, copy.open("w") as target:
        for line in source:
            fields = line.split()
            if fields and not line.lstrip().startswith(";") and fields[3] == "0":
                fields[3] = "1"
                line = " ".join(fields) + "\n"
            target.write(line)
    return copy


def fcfs_vs_accasim(src: Path, python: Path, bench: Path, plain: Path, cores: int,
                    shift: float, work: Path, timeout: float) -> tuple[Run, Run | str, str]:
    """Ours FCFS and AccaSim's FIFO on a plain log (``--platform cores``); the check."""
    results = work / f"{plain.stem}-fifo"
    mine = ours(src, plain, results / "ours", ["--policy", "fcfs", "--platform", str(cores)])
    jobs = json.loads(mine.stdout)["jobs"]
    theirs = accasim_run(python, bench, plain, "fifo", cores, results, timeout)
    if isinstance(theirs, str):
        return mine, theirs, theirs
    acc = shifted(accasim_starts(results, plain), shift)
    return mine, theirs, same_starts(csv_starts(results / "ours" / "jobs.csv"), acc,
                                     "AccaSim", jobs)


def shifted(starts: dict[str, float], shift: float) -> dict[str, float]:
    return {job: start - shift for job, start in starts.items()}


def reference_starts(plain: Path, nodes: int, shift: float) -> dict[str, float]:
    """The textbook EASY of tests/sim/test_easy_reference.py on the log, processors as
    nodes, with the reader's rules (size -1 or run time -1 skipped; no wall time: never
    expected to end)."""
    from tests.sim.test_easy_reference import Rigid, reference_easy

    jobs = []
    for line in plain.read_text().splitlines():
        f = line.split()
        if not f or f[0].startswith(";"):
            continue
        size = int(f[7]) if int(f[7]) > 0 else int(f[4])
        if size <= 0 or float(f[3]) < 0:
            continue
        wall = float(f[8]) if float(f[8]) > 0 else float("inf")
        jobs.append(Rigid(f[0], float(f[1]) - shift, size, float(f[3]), wall))
    return reference_easy(jobs, nodes)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--logs", default=",".join(LOGS), help="comma-separated log names")
    parser.add_argument("--accasim", action="store_true", help="also AccaSim and the checks")
    parser.add_argument("--accasim-venv", type=Path, default=ROOT / ".venv-accasim")
    parser.add_argument("--bench", type=Path, default=ROOT.parent / "shared" / "bench")
    parser.add_argument("--timeout", type=float, default=1200, help="s per AccaSim run")
    parser.add_argument("--tree", type=Path, help="run ours from this src/ (default: a copy)")
    parser.add_argument("--reference", action="store_true",
                        help="EASY start times against the textbook reference (--platform "
                             "MaxProcs; without --accasim too)")
    parser.add_argument("--no-easy", action="store_true", help="FCFS/FIFO only with --accasim")
    parser.add_argument("--no-ours", action="store_true",
                        help="skip the header-platform rows (ours FCFS, EASY, easy-dmr)")
    parser.add_argument("--zero-as-one", action="store_true",
                        help="with --accasim, also FCFS vs FIFO with run times 0 made 1 s")
    args = parser.parse_args()
    folder = traces_dir()
    if folder is None:
        print("SKIPPED: no shared/traces beside the checkout")
        return 0
    with tempfile.TemporaryDirectory(prefix="bench-logs-") as tmp:
        work = Path(tmp)
        src = args.tree or compiled.source(work / "src-copy")
        python = None
        if args.accasim:
            python, problem = ensure_venv(args.accasim_venv, args.bench)
            if python is None:
                print(f"SKIPPED AccaSim: {problem}")
        table: list[str] = []
        for name in args.logs.split(","):
            log = folder / f"{name}.swf.gz"
            out = work / name
            print(f"== {name}", flush=True)
            for label, extra in POLICIES if not args.no_ours else ():
                run = ours(src, log, out, extra)
                summary = json.loads(run.stdout)
                jobs = summary["jobs"]
                print(f"  ours {label:34s} header platform {summary['platform']:>5s} nodes: "
                      f"{jobs:,} jobs in {run.cpu:.2f} s CPU = {jobs / run.cpu:,.0f} jobs/s, "
                      f"peak {run.rss_mib:.0f} MiB", flush=True)
            if python is None and not args.reference:
                continue
            plain, header, shift = plain_copy(log, work)
            cores = header.max_procs or header.nodes or 1
            if python is not None:
                mine, theirs, check = fcfs_vs_accasim(src, python, args.bench, plain, cores,
                                                      shift, work, args.timeout)
                jobs = json.loads(mine.stdout)["jobs"]
                line = (f"  --platform {cores} fcfs: ours {mine.cpu:.2f} s "
                        f"({jobs / mine.cpu:,.0f} jobs/s, {mine.rss_mib:.0f} MiB)")
                if isinstance(theirs, str):
                    line += f"; {theirs}"
                    table.append(f"| {name} | {jobs:,} | {mine.cpu:.2f} s | {theirs} |")
                else:
                    count = json.loads(theirs.stdout.strip().splitlines()[-1])["loaded_jobs"]
                    line += (f"; AccaSim FIFO {theirs.cpu:.2f} s ({count / theirs.cpu:,.0f} "
                             f"jobs/s, {count:,} jobs, {theirs.rss_mib:.0f} MiB); AccaSim/ours "
                             f"{theirs.cpu / mine.cpu:.1f}x; {check}")
                    table.append(f"| {name} | {jobs:,} | {mine.cpu:.2f} s | {theirs.cpu:.2f} s "
                                 f"| {theirs.cpu / mine.cpu:.1f}x | {jobs / mine.cpu:,.0f} | "
                                 f"{count / theirs.cpu:,.0f} |")
                print(line, flush=True)
                if args.zero_as_one:
                    _, _, check = fcfs_vs_accasim(src, python, args.bench, zero_as_one(plain),
                                                  cores, shift, work, args.timeout)
                    print(f"  run time 0 made 1 s on both sides: {check}", flush=True)
            if args.no_easy or (python is None and not args.reference):
                continue
            results = work / f"{name}-easy"
            mine = ours(src, log, results / "ours", ["--policy", "easy", "--platform", str(cores)])
            jobs = json.loads(mine.stdout)["jobs"]
            line = (f"  --platform {cores} easy: ours {mine.cpu:.2f} s "
                    f"({jobs / mine.cpu:,.0f} jobs/s)")
            if args.reference:
                starts = csv_starts(results / "ours" / "jobs.csv")
                line += "; " + same_starts(starts, reference_starts(plain, cores, shift),
                                           "textbook EASY", jobs)
            if python is not None:
                theirs = accasim_run(python, args.bench, plain, "easy", cores, results,
                                     args.timeout)
                line += f"; {theirs}" if isinstance(theirs, str) else (
                    f"; AccaSim EASY {theirs.cpu:.2f} s; AccaSim/ours "
                    f"{theirs.cpu / mine.cpu:.1f}x")
            print(line, flush=True)
    if table:
        print("\n| log | jobs | ours FCFS | AccaSim FIFO | AccaSim/ours | ours jobs/s | "
              "AccaSim jobs/s |\n|---|---|---|---|---|---|---|")
        print("\n".join(table))
    return 0


if __name__ == "__main__":
    os.environ.setdefault("TZ", "UTC")
    raise SystemExit(main())
