"""OAR adapter figures on the real testbed: the cost of emulated malleability.

    python3 benchmarks/bench_oar.py [--samples 10] [--name NAME] [--mixed]

* grow and shrink latency (p50, p95) on an OAR site of 4 nodes: a running malleable job
  of 1 node is grown by 2 (two single-node extension jobs submitted in one call, then
  waited on until OAR runs them) and shrunk by 2 (``oardel`` of the extensions),
  ``--samples`` times, over SSH. A grow's time is OAR's scheduling and launch of the
  extension jobs; a shrink returns once ``oardel`` has answered (the adapter's view counts
  the nodes idle from then on; OAR frees them a few seconds later, when it has ended the
  jobs: measured too, as "nodes idle", from OAR's own poll);
* with ``--mixed``: the bring-up time of ``das3-mixed`` (3 Slurm and 2 OAR sites,
  272 nodes) and its take-down.

A testbed named with ``--name`` is reused when up (brought up otherwise) and left up.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from malleable.adapters.oar import OarCluster, OarPayload
from malleable.adapters.oar.sites import oar_ctl_for
from malleable.clock import ScaledClock
from malleable.config import load_config
from malleable.model import JobKind, JobSpec
from malleable.testbed import Site, Testbed, Topology
from malleable.testbed.topology import DAS3_MIXED

OAR_SITE = Topology("oar-bench", (Site("grid", 4, kind="oar"),))


def percentiles(values: list[float]) -> str:
    ordered = sorted(values)
    p50 = statistics.median(ordered)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    return f"p50 {p50:6.2f} s   p95 {p95:6.2f} s   (n={len(ordered)})"


def wait(predicate: object, timeout: float, what: str) -> float:
    began = time.monotonic()
    while not predicate():  # type: ignore[operator]
        if time.monotonic() - began > timeout:
            raise SystemExit(f"{what} did not happen within {timeout:g} s")
        time.sleep(0.2)
    return time.monotonic() - began


def oar_idle(oar: OarCluster) -> int:
    """Usable nodes no OAR job holds (``Finishing`` ones included), from a fresh poll: the
    adapter's view counts released extensions' nodes idle at once."""
    poll = oar.ctl.poll()
    held = {a for j in poll.jobs if j.holds_nodes for a in j.nodes}
    return sum(n.usable and n.address not in held for n in poll.nodes)


def resize_latency(tb: Testbed, samples: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "clusters.toml"
        path.write_text(tb.config_toml())
        site = load_config(path).site("grid")
    oar = OarCluster("grid", oar_ctl_for(site), ScaledClock(time.time()), f"bench{os.getpid()}",
                     OarPayload(), grow_wait=60.0)
    spec = JobSpec("bench-1", JobKind.MALLEABLE, 1, 3, 1, app="fixed", runtime=3600.0)
    if oar.start(spec, 1) != 1:
        raise SystemExit("could not submit the benchmark job")
    began = time.monotonic()
    wait(lambda: "bench-1" in oar.observe().running, 60, "the benchmark job's start")
    print(f"start of a 1-node job (submit to running): {time.monotonic() - began:.2f} s")
    grow: list[float] = []
    shrink: list[float] = []
    idle: list[float] = []
    try:
        for _ in range(samples):
            began = time.monotonic()
            if oar.offer_grow("bench-1", 2) != 2:
                raise SystemExit("grow by 2 refused")
            grow.append(time.monotonic() - began)
            began = time.monotonic()
            if oar.request_shrink("bench-1", 2, True) != 2:
                raise SystemExit("shrink by 2 refused")
            shrink.append(time.monotonic() - began)
            wait(lambda: oar_idle(oar) == 3, 60, "the released nodes to be idle in OAR")
            idle.append(time.monotonic() - began)
    finally:
        oar.cancel("bench-1")
        oar.close()
    print(f"grow 1->3 nodes (extensions running): {percentiles(grow)}")
    print(f"shrink 3->1 nodes (oardel answered):  {percentiles(shrink)}")
    print(f"shrink 3->1 nodes (nodes idle):       {percentiles(idle)}")


def mixed_bringup() -> None:
    tb = Testbed(f"oarbench{os.getpid()}-mixed")
    try:
        began = time.monotonic()
        status = tb.up(DAS3_MIXED)
        print(f"das3-mixed up in {time.monotonic() - began:.1f} s: {status.idle} idle nodes, "
              f"{status.controllers_up} controllers up")
    finally:
        began = time.monotonic()
        tb.down()
        print(f"das3-mixed down in {time.monotonic() - began:.1f} s")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=10)
    parser.add_argument("--name", help="reuse (or bring up) this OAR testbed and leave it up")
    parser.add_argument("--mixed", action="store_true", help="also time das3-mixed bring-up")
    args = parser.parse_args()
    tb = Testbed(args.name or f"oarbench{os.getpid()}")
    try:
        began = time.monotonic()
        tb.up(OAR_SITE)
        print(f"testbed {tb.name} (1 OAR site, 4 nodes) up in {time.monotonic() - began:.1f} s")
        resize_latency(tb, args.samples)
    finally:
        if args.name is None:
            tb.down()
    if args.mixed:
        mixed_bringup()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
