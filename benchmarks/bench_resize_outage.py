"""Expand and shrink latency from the manager's decision to Slurm's confirmation, on a
quiet testbed and while one site's controller is down.

Each scenario is one real ``malleable manager run`` (KOALA, ``--workload wm`` on the two
sites of the ``small`` topology). Its journal (``state.sqlite``) gives, for every grow or
shrink the policy decided, the decision's time (the cycle's ``now``: an ``operations`` row)
and the time the adapter confirmed the new size by reading the job back (the job's next
``RUNNING`` event with another size); their difference, in real seconds, is the
*decision-to-confirmed* latency. It includes the rest of the cycle ahead of the resize
(observing the sites, deciding, earlier actions), which is what a site that is down could
slow. A grow answered *pending* (the expansion runs in a worker from the decision on) is
recorded at its answer; its latency is the worker's resize time (``resizes.seconds``).
The resizer's own time (request to read-back, ``resizes.seconds``) is printed too.

* ``quiet``: nothing else happens;
* ``one site down``: uva's ``slurmctld`` is stopped ``--down-after`` seconds into the run
  for ``--outage`` seconds (its polls hang, as in tests/integration/test_site_outage.py);
  the figures are over the resizes decided while it was down, and over the whole run.

Usage (the testbed must be up: ``malleable testbed up --name tb-rel2 --topology small``)::

    PYTHONPATH=src python3 benchmarks/bench_resize_outage.py --name tb-rel2 [--jobs 20]
        [--policy fpsma --approach pwa] [--scenarios quiet,down] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from malleable.testbed import Testbed  # noqa: E402

DOWN_SITE = "uva"


@dataclass
class Latency:
    """Decision-to-confirmed latencies (real seconds) of one kind of resize."""

    kind: str
    seconds: list[float] = field(default_factory=list)
    resizer: list[float] = field(default_factory=list)
    unconfirmed: int = 0

    def p(self, q: float, values: list[float] | None = None) -> float | None:
        data = sorted(self.seconds if values is None else values)
        if not data:
            return None
        return round(data[min(len(data) - 1, round(q * (len(data) - 1)))], 3)


@dataclass
class Scenario:
    name: str
    rc: int
    wall: float
    summary: dict[str, object]
    window: tuple[float, float] | None
    all_runs: dict[str, Latency]
    in_window: dict[str, Latency]


def latencies(state: Path, scale: float, window: tuple[float, float] | None,
              origin: float) -> dict[str, Latency]:
    """Per kind (grow, shrink): decision-to-confirmed seconds from the journal.

    ``window`` (real seconds since ``origin``, the run's clock origin) keeps only the
    resizes decided inside it.
    """
    db = sqlite3.connect(state)
    ops = db.execute("SELECT time, kind, job_id, amount FROM operations "
                     "WHERE kind IN ('grow', 'shrink') ORDER BY seq").fetchall()
    events = db.execute("SELECT time, job_id, state, size FROM events ORDER BY seq").fetchall()
    resizer = db.execute("SELECT before, target, seconds, outcome FROM resizes").fetchall()
    done = db.execute("SELECT job_id, before, after, seconds FROM resizes "
                      "WHERE outcome = 'done' ORDER BY id").fetchall()
    db.close()
    out = {"grow": Latency("grow"), "shrink": Latency("shrink")}
    for time_, kind, job, amount in ops:
        real = float(time_) * scale
        if window is not None and not window[0] <= real <= window[1]:
            continue
        confirmed = next((float(t) for t, j, s, _ in events
                          if j == job and s == "running" and float(t) >= float(time_)
                          and _changes(events, job, float(t))), None)
        if confirmed is None:
            out[kind].unconfirmed += 1
        elif confirmed > float(time_):
            out[kind].seconds.append((confirmed - float(time_)) * scale)
            _pending_seconds(done, job, kind, int(amount))  # its resize row: used up
        else:
            # A pending answer (a grow's expansion runs in a worker): the manager records
            # the operation when the answer arrives, at the confirmation's time. The
            # worker began at the decision (a negotiation is refused, never queued, when
            # no worker is free), so its resize's own time is the decision-to-confirmed.
            seconds = _pending_seconds(done, job, kind, int(amount))
            if seconds is None:
                out[kind].unconfirmed += 1
            else:
                out[kind].seconds.append(seconds)
    for before, target, seconds, outcome in resizer:
        if outcome == "done" and seconds is not None and window is None:
            out["grow" if target > before else "shrink"].resizer.append(float(seconds))
    return out


def _pending_seconds(done: list[tuple[str, int, int, float | None]], job: str, kind: str,
                     amount: int) -> float | None:
    """The resizer's time of the first unused done resize of ``job`` that took (grow) or
    gave back (shrink) ``amount`` nodes; that row is used up."""
    for i, (j, before, after, seconds) in enumerate(done):
        change = after - before if kind == "grow" else before - after
        if j == job and change == amount and seconds is not None:
            del done[i]
            return float(seconds)
    return None


def _changes(events: list[tuple[float, str, str, int]], job: str, at: float) -> bool:
    """Whether the job's RUNNING event at ``at`` changed its size (not its start)."""
    sizes = [int(n) for t, j, s, n in events if j == job and s == "running" and float(t) <= at]
    return len(sizes) >= 2 and sizes[-1] != sizes[-2]


def origin_of(state: Path) -> float:
    db = sqlite3.connect(state)
    row = dict(db.execute("SELECT key, value FROM meta").fetchall())
    db.close()
    return float(json.loads(row["run"])["epoch0"])  # the clock's origin (epoch seconds)


def controller(tb: Testbed, up: bool) -> None:
    if not up:
        tb.exec(DOWN_SITE, ["pkill", "-x", "slurmctld"], check=True)
        return
    if tb.exec(DOWN_SITE, ["pgrep", "-x", "slurmctld"]).returncode != 0:
        tb.exec(DOWN_SITE, ["/usr/sbin/slurmctld"], check=True)
    deadline = time.monotonic() + 90
    while "UP" not in tb.exec(DOWN_SITE, ["scontrol", "ping"], timeout=40).stdout:
        if time.monotonic() > deadline:
            raise SystemExit(f"{DOWN_SITE}'s slurmctld did not come back within 90 s")
        time.sleep(1)


def quiet_queue(tb: Testbed) -> None:
    deadline = time.monotonic() + 120
    for site in ("vu", DOWN_SITE):
        tb.exec(site, ["scancel", "--user=malleable"])
    while any(tb.exec(s, ["squeue", "--noheader"], timeout=40).stdout.strip()
              for s in ("vu", DOWN_SITE)):
        if time.monotonic() > deadline:
            raise SystemExit("the queues did not empty within 120 s")
        time.sleep(1)


def run(tb: Testbed, name: str, args: argparse.Namespace, work: Path) -> Scenario:
    quiet_queue(tb)
    config = work / "clusters.toml"
    config.write_text(tb.config_toml())
    out, state = work / name / "out", work / name / "state.sqlite"
    argv = [sys.executable, "-m", "malleable", "manager", "run", "--config", str(config),
            "--policy", args.policy, "--approach", args.approach, "--workload", "wm",
            "--jobs", str(args.jobs), "--seed", str(args.seed), "--time-scale",
            str(args.time_scale), "--poll", str(args.poll), "--deadline", "900",
            "--out", str(out), "--state", str(state), "--json"]
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    window: list[float] = []
    began = time.monotonic()
    proc = subprocess.Popen(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True)
    outage = None
    if name == "down":
        def cut() -> None:
            time.sleep(args.down_after)
            controller(tb, False)
            window.append(time.time())
            time.sleep(args.outage)
            window.append(time.time())
            controller(tb, True)
        outage = threading.Thread(target=cut, daemon=True)
        outage.start()
    try:
        _, err = proc.communicate(timeout=1200)
    finally:
        if outage is not None:
            outage.join(timeout=args.outage + 200)
            controller(tb, True)
    wall = time.monotonic() - began
    if proc.returncode != 0:
        print(f"{name}: manager run exited {proc.returncode}: {err.strip()[-400:]}")
    summary = json.loads((out / "summary.json").read_text()) if (
        out / "summary.json").exists() else {"stopped": f"exit {proc.returncode}"}
    origin = origin_of(state)
    span = (window[0] - origin, window[1] - origin) if len(window) == 2 else None
    return Scenario(name, proc.returncode, wall, summary, span,
                    latencies(state, args.time_scale, None, origin),
                    latencies(state, args.time_scale, span, origin) if span else {})


def line(label: str, lat: Latency) -> str:
    text = (f"  {label:<28} {lat.kind:<6} n={len(lat.seconds):<3} p50 {lat.p(0.5)} s  "
            f"p95 {lat.p(0.95)} s  max {lat.p(1.0)} s")
    if lat.resizer:
        text += f"  (resizer p95 {lat.p(0.95, lat.resizer)} s)"
    return text + (f"  unconfirmed {lat.unconfirmed}" if lat.unconfirmed else "")


def report(s: Scenario) -> None:
    health = s.summary.get("site_health", {})
    print(f"{s.name}: rc {s.rc}, {s.wall:.0f} s, stopped {s.summary.get('stopped')}, "
          f"completed {s.summary.get('completed')}, cycle p95 {s.summary.get('cycle_p95_s')} s, "
          f"resizes {s.summary.get('resizes')}")
    print(f"  site health: {json.dumps(health)}")
    for lat in s.all_runs.values():
        print(line("whole run", lat))
    if s.window is not None:
        print(f"  outage window {s.window[0]:.1f}-{s.window[1]:.1f} s of the run:")
        for lat in s.in_window.values():
            print(line(f"decided while {DOWN_SITE} down", lat))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--name", required=True, help="a running small testbed")
    parser.add_argument("--jobs", type=int, default=20)
    parser.add_argument("--seed", type=int, default=3)
    parser.add_argument("--policy", default="fpsma")
    parser.add_argument("--approach", default="pwa")
    parser.add_argument("--time-scale", type=float, default=0.05)
    parser.add_argument("--poll", type=float, default=2.0,
                        help="the manager's poll (a run ends after 10 cycles with no site "
                             "answering: on a loaded machine a poll can take 10 s)")
    parser.add_argument("--down-after", type=float, default=10.0)
    parser.add_argument("--outage", type=float, default=60.0)
    parser.add_argument("--scenarios", default="quiet,down")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    tb = Testbed(args.name)
    results = []
    with tempfile.TemporaryDirectory(prefix="bench-outage-") as tmp:
        for name in args.scenarios.split(","):
            if name not in ("quiet", "down"):
                parser.error(f"unknown scenario {name!r}; valid: quiet, down")
            results.append(run(tb, name, args, Path(tmp)))
            report(results[-1])
    if args.json:
        print(json.dumps([asdict(r) for r in results], default=str))
    return 0 if all(r.rc == 0 for r in results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
