"""Kill-point fault injection against the real testbed: ``kill -9`` at each journal boundary.

For every kill point ``BOUNDARY:N`` (:mod:`malleable.faults`), one ``malleable manager
run`` is started with ``MALLEABLE_KILL_AT=BOUNDARY:N`` (it SIGKILLs itself the N-th time
it reaches that boundary), then the same command is run again without it and must take
the run up to its end. Then, from Slurm itself on every site:

* every workload job ran exactly once to completion: exactly one Slurm job per workload
  job in ``sacct`` (by its name ``m.RUN.JOB``), and it is COMPLETED;
* no duplicate: no second Slurm job of a workload job, in any state, on any site;
* no orphan: no helper allocation of the run left in any queue.

Usage (the testbed must be up: ``malleable testbed up --name tb-rel --topology small``)::

    PYTHONPATH=src python3 benchmarks/bench_killpoints.py --name tb-rel [--points all]
        [--jobs 6] [--json]

``--points`` takes ``all`` (the 24 points of :data:`ALL_POINTS`) or a comma list such as
``submit.after:1,handover.given:1``. It prints one line per point and a total; exit
status 1 if any point lost, duplicated or orphaned anything. A point the run never
reached (the manager ended first) is reported ``not reached`` and does not count.
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
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from malleable.adapters.slurm import meta  # noqa: E402
from malleable.faults import ENV  # noqa: E402
from malleable.testbed import Testbed  # noqa: E402

ALL_POINTS = (
    "submit.before:1", "submit.before:3", "submit.before:5",
    "submit.after:1", "submit.after:3", "submit.after:5",
    "submit.done:1", "submit.done:4",
    "helper.granted:1", "helper.granted:2", "helper.granted:3",
    "handover.before:1", "handover.before:2",
    "handover.given:1", "handover.given:2",
    "handover.after:1", "handover.after:2",
    "shrink.before:1", "shrink.before:2",
    "shrink.after:1", "shrink.after:2",
    "submit.after:2", "helper.granted:4", "handover.given:3",
)


@dataclass
class PointResult:
    point: str
    killed: bool
    resumed_rc: int
    jobs: int
    completed: int
    lost: list[str] = field(default_factory=list)
    duplicated: dict[str, int] = field(default_factory=dict)
    orphans: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return (self.resumed_rc == 0 and not self.lost and not self.duplicated
                and not self.orphans)


def _malleable(*args: str, env: dict[str, str] | None = None, timeout: float = 900
               ) -> subprocess.CompletedProcess[str]:
    full = {k: v for k, v in os.environ.items() if k != ENV}
    full.update(PYTHONPATH=str(ROOT / "src"), **(env or {}))
    return subprocess.run([sys.executable, "-m", "malleable", *args], capture_output=True,
                          text=True, env=full, timeout=timeout, cwd=ROOT)


def _exec(tb: Testbed, site: str, *argv: str) -> str:
    return tb.exec(site, list(argv), check=True, timeout=120).stdout


def _sites(config: Path) -> list[str]:
    import tomllib

    return list(tomllib.loads(config.read_text())["clusters"])


def check_slurm(tb: Testbed, sites: list[str], run_id: str, job_ids: list[str]
                ) -> tuple[Counter[str], Counter[str], list[str]]:
    """Per workload job: Slurm jobs in sacct, those COMPLETED; helpers left in queues."""
    names = {meta.job_name(j, run_id): j for j in job_ids}
    states: dict[tuple[str, str], str] = {}  # (site, Slurm id) -> its last state
    owner: dict[tuple[str, str], str] = {}
    orphans: list[str] = []
    for site in sites:
        rows = _exec(tb, site, "sacct", "-X", "--parsable2", "--noheader", "--allusers",
                     "--starttime=now-1days", "--format=JobID,JobName,State",
                     "--name=" + ",".join(sorted(names)))
        for row in rows.splitlines():  # a resized job has one RESIZING row per earlier size
            parts = row.split("|")
            if len(parts) == 3 and parts[1] in names:
                key = (site, parts[0])
                owner[key] = names[parts[1]]
                if parts[2] != "RESIZING" or key not in states:
                    states[key] = parts[2]
        queue = _exec(tb, site, "squeue", "--noheader", "--format=%i|%j|%T|%k")
        for row in queue.splitlines():
            if f'"run":"{run_id}"' in row and "helper_for" in row:
                orphans.append(f"{site}:{row.split('|')[0]}")
    copies = Counter(owner.values())
    completed = Counter(owner[k] for k, state in states.items() if state == "COMPLETED")
    return copies, completed, orphans


def run_point(point: str, config: Path, tb: Testbed, jobs: int, work: Path,
              extra: list[str]) -> PointResult:
    out = work / point.replace(":", "_")
    args = ["manager", "run", "--config", str(config), "--policy", "fpsma", "--approach",
            "pwa", "--workload", "wm", "--jobs", str(jobs), "--time-scale", "0.05",
            "--poll", "0.5", "--out", str(out), "--json", *extra]
    began = time.monotonic()
    first = _malleable(*args, env={ENV: point})
    killed = first.returncode == -9
    second = _malleable(*args) if killed else first
    summary = json.loads((out / "summary.json").read_text()) if (
        out / "summary.json").exists() else {}
    run_id = summary.get("run_id", "")
    job_ids = []
    if (out / "jobs.csv").exists():
        with (out / "jobs.csv").open() as rows:
            job_ids = [row["job"] for row in csv.DictReader(rows)]
    copies, completed, orphans = check_slurm(tb, _sites(config), run_id, job_ids)
    result = PointResult(point, killed, second.returncode, len(job_ids),
                         sum(1 for j in job_ids if completed[j] == 1 and copies[j] == 1),
                         [j for j in job_ids if completed[j] != 1],
                         {j: n for j, n in copies.items() if n > 1}, orphans,
                         round(time.monotonic() - began, 1))
    if second.returncode != 0:
        result.lost = result.lost or ["(resumed run failed: " + second.stderr[-300:] + ")"]
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--name", default="tb-rel", help="the testbed's name (up already)")
    parser.add_argument("--points", default="all", help="'all' or BOUNDARY:N,...")
    parser.add_argument("--jobs", type=int, default=6, help="workload jobs per run")
    parser.add_argument("--json", action="store_true", help="one JSON object at the end")
    args = parser.parse_args(argv)
    points = list(ALL_POINTS) if args.points == "all" else args.points.split(",")
    work = Path(tempfile.mkdtemp(prefix="killpoints-"))
    config = work / "clusters.toml"
    shown = _malleable("testbed", "config", "--name", args.name)
    if shown.returncode != 0:
        print(f"testbed {args.name}: {shown.stderr.strip()}", file=sys.stderr)
        return 2
    config.write_text(shown.stdout)
    results = []
    for point in points:
        result = run_point(point, config, Testbed(args.name), args.jobs, work, [])
        results.append(result)
        state = ("ok" if result.ok else "FAIL") if result.killed else "not reached"
        print(f"{point:20s} {state:11s} killed={result.killed} resumed_rc={result.resumed_rc}"
              f" completed={result.completed}/{result.jobs} lost={result.lost}"
              f" duplicated={result.duplicated} orphans={result.orphans}"
              f" {result.seconds} s", flush=True)
    reached = [r for r in results if r.killed]
    failed = [r for r in results if not r.ok]
    print(f"kill points reached: {len(reached)} of {len(results)}; "
          f"lost {sum(len(r.lost) for r in results)}, "
          f"duplicated {sum(len(r.duplicated) for r in results)}, "
          f"orphaned {sum(len(r.orphans) for r in results)}; "
          f"{sum(r.seconds for r in results):.0f} s in all")
    if args.json:
        print(json.dumps([asdict(r) | {"ok": r.ok} for r in results]))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
