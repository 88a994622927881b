"""The site service's memory over a long run, on the fake Slurm of the tests (no testbed).

    python3 benchmarks/bench_serve_memory.py [--cycles 3000] [--warmup 500] [--sites 2]
                                             [--top 15] [--seed 13]

The real service objects (:func:`malleable.site.assembly.open_service`, the driver's cycle:
what ``malleable manager serve`` runs) over ``--sites`` fake Slurm sites of 12 nodes, with
a clock that advances one poll period (3 s) per cycle. Each cycle a user job (min 1,
max 3, held) is submitted on a random site, and each running user job ends with a
probability of 1/15 per cycle; the policy places, grows and shrinks them. Ended jobs
leave the fake's queue (Slurm's ``MinJobAge``), and the fake's own call log is cleared.

``tracemalloc`` snapshots are taken after ``--warmup`` cycles, halfway from there to the
end, and at the end. Each is taken right after a full ``gc.collect()``: that frees cyclic
garbage (the status file's ``json`` encoder leaves some each cycle) and empties CPython's
free lists. Without it, a tuple parked in the tuple free list keeps the trace of the line
that first allocated it (a poll's ``SlurmJob(...)``, ``Poll``), which looks like poll
objects kept alive but is memory the interpreter holds for reuse (bounded: at most 2000
tuples of each length below 20). Left out: allocations with a frame in the fake Slurm
(``tests/fakes``) and ``tracemalloc``'s own (the first snapshot is held to the end).
Printed: the traced memory at the three points, the end/warm-up ratio and the growth of
each half (a bounded plateau grows in the first half, not in the second), the jobs
submitted/ended and resizes kept, the sizes of the service's per-job structures, and the
``--top`` allocation sites that grew most from the warm-up to the end (file:line, size and
count differences).
"""

from __future__ import annotations

import argparse
import gc
import logging
import os
import random
import sys
import tempfile
import tracemalloc
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "src"), str(ROOT)]

from tests.fakes.slurm import FakeSlurm, node_names, settle  # noqa: E402

from malleable.adapters.slurm.ctl import SlurmCtl  # noqa: E402
from malleable.realtime import Outcome  # noqa: E402
from malleable.site import tag as tags  # noqa: E402
from malleable.site.assembly import open_service  # noqa: E402
from malleable.site.config import parse_service_config  # noqa: E402
from malleable.site.daemon import SiteService  # noqa: E402
from malleable.site.driver import driver_for  # noqa: E402

POLL = 3.0
LEAVE_OUT = [tracemalloc.Filter(False, "*/tests/fakes/*", all_frames=True),
             tracemalloc.Filter(False, tracemalloc.__file__)]


@dataclass
class Wall:
    """A wall clock that moves only when told (one poll period per cycle)."""

    t: float

    def __call__(self) -> float:
        return self.t


@dataclass
class Soak:
    cycles: int
    warmup_bytes: int
    middle_bytes: int
    end_bytes: int
    submitted: int
    ended: int
    resizes: int
    sizes: dict[str, int]
    top: list[tracemalloc.StatisticDiff]

    @property
    def ratio(self) -> float:
        return self.end_bytes / self.warmup_bytes

    @property
    def halves(self) -> tuple[int, int]:
        """The traced growth (bytes) from the warm-up to halfway, and from there to the end."""
        return self.middle_bytes - self.warmup_bytes, self.end_bytes - self.middle_bytes


def snapshot() -> tracemalloc.Snapshot:
    """The live traced memory: after a full collection (cyclic garbage and free lists)."""
    gc.collect()
    return tracemalloc.take_snapshot().filter_traces(LEAVE_OUT)


def traced(snap: tracemalloc.Snapshot) -> int:
    return sum(s.size for s in snap.statistics("filename"))


def structures(service: SiteService) -> dict[str, int]:
    """The sizes of the service's structures that could grow with ended jobs."""
    manager = service.manager
    out = {"live": manager.unfinished, "records": len(manager.records),
           "operations": len(manager.operations)}
    for name, adapter in service.adapters.items():
        cluster = adapter.cluster  # the Slurm adapter the service site wraps
        out[f"{name}._mine"] = len(cluster._mine)
        out[f"{name}._by_slurm"] = len(cluster._by_slurm)
        out[f"{name}.resizes"] = len(adapter.resizes)
        out[f"{name}.shrink_marks"] = len(adapter.resizer._last_shrink) if adapter.resizer else 0
    status = service.status()
    out["status.jobs"] = len(status["jobs"])
    return out


def run(cycles: int, warmup: int, sites: int, seed: int, top: int = 15) -> Soak:
    """The soak (see the module's text)."""
    if not 0 < warmup < cycles:
        raise SystemExit("need 0 < --warmup < --cycles")
    rng = random.Random(seed)
    tracemalloc.start(10)
    with tempfile.TemporaryDirectory() as tmp, ThreadPoolExecutor(4) as pool:
        names = [f"s{i}" for i in range(sites)]
        fakes = {n: FakeSlurm(node_names(12), admin_levels={"malleable": "Operator"})
                 for n in names}
        doc = {"service": {"state": str(Path(tmp) / "state.sqlite"), "poll": POLL},
               "policy": {"name": "fpsma", "options": {"approach": "pwa"}},
               "clusters": {n: {} for n in names}}
        config = parse_service_config(doc, "bench", Path(tmp))
        service = open_service(config, lambda s: SlurmCtl(fakes[s.name], user="malleable"))
        wall = Wall(service.clock.epoch0 + 1.0)
        object.__setattr__(service.clock, "wall", wall)  # frozen dataclass: this run only
        driver = driver_for(service)
        driver.poll_timeout = 60.0
        submitted = ended = 0
        middle_at = warmup + (cycles - warmup) // 2
        first = None
        middle = 0
        for n in range(1, cycles + 1):
            site = fakes[rng.choice(names)]
            site.add_job(1, tags.encode(tags.UserTag(1, 3, sub=f"m{n}")), user="bob",
                         held=True)
            submitted += 1
            driver._cycle(pool, Outcome(0, "", 0))
            settle(service.adapters.values())  # expansions run in workers: let them end
            wall.t += POLL
            for fake in fakes.values():
                fake.now += int(POLL)
                for job in list(fake.jobs.values()):
                    if job.state == "RUNNING" and job.user == "bob" and rng.random() < 1 / 15:
                        fake.finish(job.job_id)
                        ended += 1
                for job_id in [j for j, job in fake.jobs.items()
                               if job.state in ("COMPLETED", "CANCELLED")]:
                    del fake.jobs[job_id]  # Slurm forgets ended jobs (MinJobAge)
                    fake.scripts.pop(job_id, None)
                fake.calls.clear()
            if n == warmup:
                first = snapshot()
            elif n == middle_at:
                middle = traced(snapshot())
        last = snapshot()
        resizes = sum(len(a.resizes) for a in service.adapters.values())
        sizes = structures(service)
        service.close()
    tracemalloc.stop()
    assert first is not None
    diff = last.compare_to(first, "lineno")
    return Soak(cycles, traced(first), middle or traced(first), traced(last), submitted,
                ended, resizes, sizes, diff[:top])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cycles", type=int, default=3000)
    ap.add_argument("--warmup", type=int, default=500)
    ap.add_argument("--sites", type=int, default=2)
    ap.add_argument("--top", type=int, default=15)
    ap.add_argument("--seed", type=int, default=13)
    args = ap.parse_args()
    logging.disable(logging.WARNING)
    soak = run(args.cycles, args.warmup, args.sites, args.seed, args.top)
    print(f"{soak.cycles} cycles ({soak.cycles * POLL / 60:.0f} service minutes), "
          f"{soak.submitted} jobs submitted, {soak.ended} ended, resizes kept {soak.resizes}")
    print(f"traced memory (fake Slurm excluded): {soak.warmup_bytes / 1024:.0f} KiB after "
          f"{args.warmup} cycles, {soak.end_bytes / 1024:.0f} KiB at the end: ratio "
          f"{soak.ratio:.3f} ({100 * (soak.ratio - 1):+.1f}%)")
    first, second = soak.halves
    print(f"growth: {first / 1024:+.0f} KiB from the warm-up to halfway "
          f"({soak.middle_bytes / 1024:.0f} KiB), {second / 1024:+.0f} KiB from there "
          f"to the end")
    print("structures at the end: " + ", ".join(f"{k}={v}" for k, v in soak.sizes.items()))
    print("top growing allocation sites (size diff, count diff):")
    for stat in soak.top:
        frame = stat.traceback[0]
        print(f"  {os.path.relpath(frame.filename, ROOT)}:{frame.lineno}  "
              f"{stat.size_diff / 1024:+.1f} KiB  {stat.count_diff:+d}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
