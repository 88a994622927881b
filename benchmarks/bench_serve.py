"""Site service figures on the fake Slurm of the tests (no testbed needed).

    python3 benchmarks/bench_serve.py [--jobs 1000] [--sites 5] [--cycles 10] [--soak S]

* **cycle CPU**: ``--jobs`` tagged user jobs (half running at their maximum, half
  waiting held) and as many background jobs over ``--sites`` sites; the service's CPU
  time (``time.process_time``) of one poll+discover+decide+act cycle, with the fake
  Slurm's own time (rendering squeue/sinfo JSON, in the same process) subtracted;
* **calls per poll** with 1/10 and with the full job count: independent of the count;
* **adoption**: a job submitted between two polls is adopted (queued or running) at
  the next cycle: polls until adopted;
* **soak** (``--soak S`` seconds, default 0): jobs submitted, grown and ended
  continuously; the process RSS (``/proc/self/statm``) at the start and the end.

On a running ``small`` testbed (``--testbed NAME``, instead of the fake):

* **testbed soak** (``--soak S``): ``manager serve`` in the vu controller as
  ``malleable`` (the integration test's set-up), alice and bob submitting continuously
  with ``malleable submit`` on both sites (short ``sleep`` jobs, min 1, max 3: the
  service grows them into freed nodes and shrinks them to place new ones); the
  service's RSS (``ps -o rss``) every ``--every`` seconds, and its growth;
* **latencies**: from the service's journal (its ``resizes`` table, written by the
  adapter: the time from the decision's first Slurm command to the size read back),
  decision-to-confirmed expand and shrink p50/p95/max.

    python3 benchmarks/bench_serve.py --testbed tb-x --soak 1800 [--every 120]
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import random
import re
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "src"), str(ROOT)]

from tests.fakes.slurm import FakeSlurm, node_names  # noqa: E402

from malleable.adapters.slurm.ctl import SlurmCtl  # noqa: E402
from malleable.realtime import Outcome  # noqa: E402
from malleable.site import tag as tags  # noqa: E402
from malleable.site.assembly import open_service  # noqa: E402
from malleable.site.config import parse_service_config  # noqa: E402
from malleable.site.daemon import SiteService  # noqa: E402
from malleable.site.driver import driver_for  # noqa: E402


class TimedFake(FakeSlurm):
    """The fake Slurm, counting its own CPU time (to subtract it from the service's)."""

    spent: float = 0.0

    def run(self, argv, timeout, *, input=None, check=True):  # type: ignore[no-untyped-def]
        began = time.thread_time()  # this thread only: the polls run in parallel threads
        try:
            return super().run(argv, timeout, input=input, check=check)
        finally:
            TimedFake.spent += time.thread_time() - began


def build(tmp: Path, sites: int, jobs: int) -> tuple[SiteService, dict[str, TimedFake]]:
    names = [f"s{i}" for i in range(sites)]
    per_site = jobs // sites
    fakes = {n: TimedFake(node_names(2 * per_site + 10), admin_levels={"malleable": "Operator"})
             for n in names}
    for fake in fakes.values():
        for i in range(per_site):
            fake.add_job(1, "", name=f"bg{i}", user="carol")
        for i in range(per_site):
            comment = tags.encode(tags.UserTag(1, 1, sub=f"j{i}"))
            fake.add_job(1, comment, name="app", user="alice", held=i % 2 == 1)
    doc = {"service": {"state": str(tmp / "state.sqlite"), "poll": 1.0},
           "policy": {"name": "fpsma", "options": {"approach": "pwa"}},
           "clusters": {n: {} for n in names}}
    config = parse_service_config(doc, "bench", tmp)
    service = open_service(config, lambda s: SlurmCtl(fakes[s.name], user="malleable"))
    return service, fakes


def cycle(service: SiteService, pool: ThreadPoolExecutor) -> float:
    """One cycle; the service's CPU seconds (the fake's own time subtracted)."""
    driver = driver_for(service)
    driver.poll_timeout = 60.0
    TimedFake.spent = 0.0
    began = time.process_time()
    driver._cycle(pool, Outcome(0, "", 0))
    return time.process_time() - began - TimedFake.spent


def calls_per_poll(service: SiteService, fakes: dict[str, TimedFake],
                   pool: ThreadPoolExecutor) -> float:
    for fake in fakes.values():
        fake.calls.clear()
    cycle(service, pool)
    return sum(len(f.calls) for f in fakes.values()) / len(fakes)


def rss_mb() -> float:
    pages = int(Path("/proc/self/statm").read_text().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


def soak(service: SiteService, fakes: dict[str, TimedFake], pool: ThreadPoolExecutor,
         seconds: float) -> tuple[float, float, int]:
    fake = next(iter(fakes.values()))
    end = time.monotonic() + seconds
    start_rss, cycles, n = None, 0, 0
    while time.monotonic() < end:
        n += 1
        fake.add_job(1, tags.encode(tags.UserTag(1, 3, sub=f"soak{n}")), user="bob", held=True)
        cycle(service, pool)
        for job in list(fake.jobs.values()):
            if job.user == "bob" and job.state == "RUNNING" and n % 2:
                fake.finish(job.job_id)
        for job_id in [j for j, job in fake.jobs.items() if job.state in ("COMPLETED",
                                                                           "CANCELLED")]:
            del fake.jobs[job_id]  # Slurm forgets ended jobs (MinJobAge)
        cycles += 1
        if cycles == 20:
            start_rss = rss_mb()
    return start_rss or rss_mb(), rss_mb(), cycles


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


def testbed_soak(name: str, seconds: float, every: float, seed: int,
                 env: dict[str, str] | None = None) -> int:
    """The soak and the latencies on testbed ``name`` (see the module's text)."""
    from tests.integration.test_site_service import HOME, Serve, unit_environment

    from malleable.testbed import Testbed

    tb = Testbed(name)
    rng = random.Random(seed)
    serve = Serve(tb, poll=3.0)
    if serve.pid():
        raise SystemExit(f"a service already runs in {name}'s vu controller")
    serve.sh(f"rm -f {HOME}/state.sqlite* {serve.log}")
    serve.start(**(env or {}))
    submitted = 0

    def rss_kb() -> int:
        pid = serve.pid()
        return int(serve.sh(f"ps -o rss= -p {pid}").strip()) if pid else 0

    def py(code: str) -> str:
        return tb.exec("vu", ["python3", "-c", code], user="malleable", timeout=60,
                       check=True).stdout

    def queued(site: str) -> int:
        out = tb.exec(site, ["squeue", "-h", "-u", "alice,bob", "-o", "%i"], timeout=30).stdout
        return len(out.split())

    try:
        began = time.monotonic()
        time.sleep(10)  # the service's start and first cycles
        samples = [(0.0, rss_kb())]
        settings = sorted(unit_environment() | (env or {}))  # as the process has them:
        environ = serve.sh(f"tr '\\0' '\\n' < /proc/{serve.pid()}/environ").splitlines()
        print("service environment: " + " ".join(
            line for line in environ if line.split("=", 1)[0] in settings), flush=True)
        print(f"t=0 s rss={samples[0][1] / 1024:.1f} MB", flush=True)
        next_sample = began + every
        while time.monotonic() - began < seconds:
            for site in ("vu", "uva"):
                if queued(site) < 4:
                    user = rng.choice(("alice", "bob"))
                    tb.exec(site, ["malleable", "submit", "--min", "1", "--max", "3", "--",
                                   "sleep", str(rng.randint(20, 70))], user=user, timeout=60,
                            check=True)
                    submitted += 1
            if time.monotonic() >= next_sample:
                samples.append((time.monotonic() - began, rss_kb()))
                print(f"t={samples[-1][0]:.0f} s rss={samples[-1][1] / 1024:.1f} MB "
                      f"submitted={submitted}", flush=True)
                next_sample += every
            time.sleep(5)
        samples.append((time.monotonic() - began, rss_kb()))
        start, end = samples[0][1], samples[-1][1]
        peak = max(kb for _, kb in samples)
        print(f"testbed soak {seconds:.0f} s, {submitted} jobs submitted: RSS "
              f"{start / 1024:.1f} MB at the start, {end / 1024:.1f} MB at the end "
              f"({100 * (end - start) / start:+.1f}%), peak {peak / 1024:.1f} MB", flush=True)
        rows = json.loads(py(
            "import json, sqlite3; print(json.dumps(sqlite3.connect("
            f"'{HOME}/state.sqlite').execute('SELECT before, target, after, outcome, seconds "
            "FROM resizes WHERE outcome IS NOT NULL').fetchall()))"))
        for kind, sign in (("expand", 1), ("shrink", -1)):
            done = [float(s) for b, t, a, o, s in rows if (t - b) * sign > 0 and o == "done"]
            other = sum(1 for b, t, a, o, s in rows if (t - b) * sign > 0 and o != "done")
            if done:
                print(f"{kind}: {len(done)} done ({other} partial/refused), decision to "
                      f"confirmed p50 {_quantile(done, 0.5):.2f} s, p95 "
                      f"{_quantile(done, 0.95):.2f} s, max {max(done):.2f} s", flush=True)
            else:
                print(f"{kind}: none done ({other} partial/refused)", flush=True)
        port = re.findall(r"event=metrics address=127.0.0.1:(\d+)", serve.text())[-1]
        cycles = re.findall(r"malleable_cycle_seconds_count ([0-9.e+]+)", py(
            "import urllib.request; print(urllib.request.urlopen("
            f"'http://127.0.0.1:{port}/metrics').read().decode())"))
        print(f"service cycles: {cycles[-1] if cycles else '?'}; log errors: "
              f"{serve.text().count(' ERROR ')}", flush=True)
    finally:
        if serve.pid():
            serve.stop("TERM")
        for site in ("vu", "uva"):
            for user in ("alice", "bob"):  # scancel -u takes one user ("alice,bob": invalid)
                tb.exec(site, ["scancel", "-u", user], timeout=30, check=True)
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=1000)
    ap.add_argument("--sites", type=int, default=5)
    ap.add_argument("--cycles", type=int, default=10)
    ap.add_argument("--soak", type=float, default=0.0, metavar="S")
    ap.add_argument("--testbed", metavar="NAME", help="soak and latencies on this running "
                    "small testbed instead of the fake Slurm")
    ap.add_argument("--every", type=float, default=120.0, metavar="S",
                    help="RSS sample period of the testbed soak")
    ap.add_argument("--seed", type=int, default=13)
    ap.add_argument("--env", action="append", default=[], metavar="KEY=VALUE",
                    help="testbed soak: the service's environment beyond the shipped unit's "
                    "(e.g. MALLOC_ARENA_MAX=4 to compare allocator settings; repeatable)")
    args = ap.parse_args()
    if args.testbed:
        if any("=" not in pair for pair in args.env):
            ap.error("--env takes KEY=VALUE, e.g. --env MALLOC_ARENA_MAX=4")
        env = dict(pair.split("=", 1) for pair in args.env)
        return testbed_soak(args.testbed, args.soak or 300.0, args.every, args.seed, env)
    logging.disable(logging.WARNING)
    with tempfile.TemporaryDirectory() as tmp, ThreadPoolExecutor(8) as pool:
        small, small_fakes = build(Path(tmp) / "small", args.sites, args.jobs // 10)
        big, fakes = build(Path(tmp) / "big", args.sites, args.jobs)
        first = cycle(big, pool)  # adoption of everything
        cycle(big, pool)
        cpu = sorted(cycle(big, pool) for _ in range(args.cycles))
        print(f"{args.jobs} tagged jobs + {args.jobs} background over {args.sites} sites: "
              f"first cycle (adopts all) {first:.3f} s CPU; steady cycle median "
              f"{cpu[len(cpu) // 2]:.3f} s, max {cpu[-1]:.3f} s CPU (fake Slurm excluded)")
        for _ in range(2):
            cycle(small, pool)
        print(f"Slurm calls per site per poll: {calls_per_poll(small, small_fakes, pool):.1f} "
              f"with {args.jobs // 10} jobs, {calls_per_poll(big, fakes, pool):.1f} with "
              f"{args.jobs}")
        fake = next(iter(fakes.values()))
        new = fake.add_job(1, tags.encode(tags.UserTag(1, 1, sub="late")), user="bob", held=True)
        polls = 0
        while "bob:late" not in big.manager.records and polls < 10:
            cycle(big, pool)
            polls += 1
        print(f"a job submitted between polls (Slurm {new.job_id}) adopted after {polls} poll(s)")
        big.close()
        if args.soak > 0:
            start, end, cycles = soak(small, small_fakes, pool, args.soak)
            print(f"soak {args.soak:.0f} s, {cycles} cycles: RSS {start:.1f} MB after 20 "
                  f"cycles, {end:.1f} MB at the end ({100 * (end - start) / start:+.1f}%)")
        small.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
