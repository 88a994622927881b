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

The figures of the real testbed (decision-to-confirmed expand and shrink latencies)
are those of ``benchmarks/bench_slurm.py``: the service resizes through the same
adapter and resize protocol.
"""

from __future__ import annotations

import argparse
import logging
import os
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
from malleable.site.config import parse_service_config  # noqa: E402
from malleable.site.daemon import SiteService, driver_for, open_service  # noqa: E402


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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--jobs", type=int, default=1000)
    ap.add_argument("--sites", type=int, default=5)
    ap.add_argument("--cycles", type=int, default=10)
    ap.add_argument("--soak", type=float, default=0.0, metavar="S")
    args = ap.parse_args()
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
