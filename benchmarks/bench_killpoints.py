"""Kill-point fault injection against the real testbed: ``kill -9`` at each journal boundary.

For every kill point ``BOUNDARY:N`` (:mod:`malleable.faults`), one ``malleable manager
run`` is started with ``MALLEABLE_KILL_AT=BOUNDARY:N`` (it SIGKILLs itself the N-th time
it reaches that boundary), then the same command is run again without it and must take
the run up to its end. Then, from Slurm itself on every site:

* every workload job ran exactly once to completion: exactly one Slurm job per workload
  job in ``sacct`` (by its name ``m.RUN.JOB``), and it is COMPLETED;
* no duplicate: no second Slurm job of a workload job, in any state, on any site;
* no orphan: no helper allocation of the run left in any queue.

A job the run records ``cancelled`` must have its one Slurm job ``CANCELLED``; only the
``cancel.*`` points cancel anything. No built-in policy cancels a running job, so those
points run the test-only plug-in policy ``cancelling-fpsma`` (``benchmarks/plugins``,
put on ``PYTHONPATH``), which runs FPSMA and cancels ``wm-2`` and ``wm-5`` once they
ran 30 workload seconds: that is what reaches the adapter's cancel.

``random:SEED`` is the external ``kill -9`` at random moments: the manager is started
and SIGKILLed from outside after a seeded random 2-10 s, ``--random-kills`` times (5 by
default; fewer if the run ends first), then run once more to its end; the same checks
follow.

Usage (the testbed must be up: ``malleable testbed up --name tb-rel --topology small``)::

    PYTHONPATH=src python3 benchmarks/bench_killpoints.py --name tb-rel [--points all]
        [--jobs 6] [--random-kills 5] [--json]

``--points`` takes ``all`` (the points of :data:`ALL_POINTS`) or a comma list such as
``submit.after:1,handover.given:1,cancel.before:1,random:7``. It prints one line per
point and a total; exit status 1 if any point lost, duplicated or orphaned anything. A
point the run never reached (the manager ended first) is reported ``not reached`` and
does not count.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import random
import signal
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
    "cancel.before:1", "cancel.after:1", "cancel.before:2", "cancel.after:2",
    "random:1", "random:2",
)

PLUGINS = ROOT / "benchmarks" / "plugins"
"""The test-only policy plug-in ``cancelling-fpsma`` (an importable module and its
``.dist-info``, which registers it in the ``malleable.policies`` group)."""

CANCELLED = ("wm-2", "wm-5")
"""The jobs ``cancelling-fpsma`` cancels at the ``cancel.*`` points."""


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
    cancelled: int = 0
    kills: list[float] = field(default_factory=list)
    """Random points: seconds after each start at which the manager was SIGKILLed."""

    @property
    def ok(self) -> bool:
        return (self.resumed_rc == 0 and not self.lost and not self.duplicated
                and not self.orphans)


def _environment(env: dict[str, str] | None = None) -> dict[str, str]:
    full = {k: v for k, v in os.environ.items() if k != ENV}
    full.update(PYTHONPATH=f"{ROOT / 'src'}{os.pathsep}{PLUGINS}", **(env or {}))
    return full


def _malleable(*args: str, env: dict[str, str] | None = None, timeout: float = 900
               ) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "malleable", *args], capture_output=True,
                          text=True, env=_environment(env), timeout=timeout, cwd=ROOT)


def _exec(tb: Testbed, site: str, *argv: str) -> str:
    return tb.exec(site, list(argv), check=True, timeout=120).stdout


def _sites(config: Path) -> list[str]:
    import tomllib

    return list(tomllib.loads(config.read_text())["clusters"])


def check_slurm(tb: Testbed, sites: list[str], run_id: str, job_ids: list[str]
                ) -> tuple[Counter[str], dict[str, str], list[str]]:
    """Per workload job: its Slurm jobs in sacct and the last state of one of them;
    helpers of the run left in any queue."""
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
                    states[key] = parts[2].split()[0]  # "CANCELLED by 1000" -> CANCELLED
        queue = _exec(tb, site, "squeue", "--noheader", "--format=%i|%j|%T|%k")
        for row in queue.splitlines():
            if f'"run":"{run_id}"' in row and "helper_for" in row:
                orphans.append(f"{site}:{row.split('|')[0]}")
    copies = Counter(owner.values())
    final = {owner[k]: state for k, state in states.items()}
    return copies, final, orphans


SLURM_STATE = {"completed": "COMPLETED", "cancelled": "CANCELLED"}
"""The Slurm end state that a record's end state must match."""


def judge(records: dict[str, str], copies: Counter[str], final: dict[str, str],
          may_cancel: tuple[str, ...]) -> tuple[list[str], dict[str, int]]:
    """The lost jobs (with why) and the duplicated ones (with their Slurm job count).

    A job is lost unless exactly one Slurm job ran it, the run recorded it ``completed``
    (or ``cancelled``, for a job of ``may_cancel`` only) and Slurm agrees.
    """
    lost = []
    for job, state in records.items():
        expected = SLURM_STATE.get(state) if state != "cancelled" or job in may_cancel else None
        if copies[job] == 0:
            lost.append(f"{job} (no Slurm job)")
        elif expected is None:
            lost.append(f"{job} (recorded {state})")
        elif copies[job] == 1 and final[job] != expected:
            lost.append(f"{job} (recorded {state}, Slurm {final[job]})")
    return lost, {j: n for j, n in copies.items() if n > 1}


def _arguments(point: str, config: Path, jobs: int, out: Path, extra: list[str]) -> list[str]:
    policy = ["--policy", "fpsma", "--approach", "pwa"]
    if point.startswith("cancel."):
        policy = ["--policy", "cancelling-fpsma", "--policy-option", "approach='pwa'",
                  "--policy-option", f"cancel={json.dumps(list(CANCELLED))}",
                  "--policy-option", "after=30"]
    return ["manager", "run", "--config", str(config), *policy, "--workload", "wm",
            "--jobs", str(jobs), "--time-scale", "0.05", "--poll", "0.5", "--out", str(out),
            "--json", *extra]


def _kill_at_random(args: list[str], seed: int, count: int) -> list[float]:
    """Start the run ``count`` times, each SIGKILLed from outside after a seeded 2-10 s
    (fewer when it ends first); the moments of the kills delivered."""
    rng = random.Random(seed)
    kills = []
    for _ in range(count):
        delay = round(rng.uniform(2.0, 10.0), 2)
        child = subprocess.Popen([sys.executable, "-m", "malleable", *args],
                                 stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                 env=_environment(), cwd=ROOT)
        try:
            child.wait(timeout=delay)
            return kills  # it ended before the kill: nothing left to interrupt
        except subprocess.TimeoutExpired:
            os.kill(child.pid, signal.SIGKILL)
            child.wait()
            kills.append(delay)
    return kills


def run_point(point: str, config: Path, tb: Testbed, jobs: int, work: Path,
              extra: list[str], random_kills: int = 5) -> PointResult:
    out = work / point.replace(":", "_")
    args = _arguments(point, config, jobs, out, extra)
    began = time.monotonic()
    kills: list[float] = []
    if point.startswith("random:"):
        kills = _kill_at_random(args, int(point.partition(":")[2]), random_kills)
        killed = bool(kills)
        second = _malleable(*args)
    else:
        first = _malleable(*args, env={ENV: point})
        killed = first.returncode == -9
        second = _malleable(*args) if killed else first
    summary = json.loads((out / "summary.json").read_text()) if (
        out / "summary.json").exists() else {}
    records: dict[str, str] = {}
    if (out / "jobs.csv").exists():
        with (out / "jobs.csv").open() as rows:
            records = {row["job"]: row["state"] for row in csv.DictReader(rows)}
    copies, final, orphans = check_slurm(tb, _sites(config), summary.get("run_id", ""),
                                         list(records))
    may_cancel = CANCELLED if point.startswith("cancel.") else ()
    lost, duplicated = judge(records, copies, final, may_cancel)
    result = PointResult(point, killed, second.returncode, len(records),
                         sum(1 for s in records.values() if s == "completed"), lost,
                         duplicated, orphans, round(time.monotonic() - began, 1),
                         sum(1 for s in records.values() if s == "cancelled"), kills)
    if second.returncode != 0:
        result.lost = result.lost or ["(resumed run failed: " + second.stderr[-300:] + ")"]
    return result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--name", default="tb-rel", help="the testbed's name (up already)")
    parser.add_argument("--points", default="all", help="'all' or BOUNDARY:N,...")
    parser.add_argument("--jobs", type=int, default=6, help="workload jobs per run")
    parser.add_argument("--random-kills", type=int, default=5,
                        help="kills of a random:SEED point (default 5)")
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
        result = run_point(point, config, Testbed(args.name), args.jobs, work, [],
                           args.random_kills)
        results.append(result)
        state = ("ok" if result.ok else "FAIL") if result.killed else "not reached"
        print(f"{point:20s} {state:11s} killed={result.killed} resumed_rc={result.resumed_rc}"
              f" completed={result.completed}/{result.jobs} cancelled={result.cancelled}"
              f" lost={result.lost}"
              f" duplicated={result.duplicated} orphans={result.orphans}"
              f"{' kills=' + str(result.kills) if result.kills else ''}"
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
