"""Testbed bring-up times: cold (images built from nothing) and warm (images present).

    python3 benchmarks/bench_bringup.py                     # warm: small and das3, up + down
    python3 benchmarks/bench_bringup.py --cold              # also: host packages, base, image
    python3 benchmarks/bench_bringup.py --topology small --repeat 3

Cold parts are measured without touching the images other testbeds use: the base image
and the testbed image are built under throwaway tags (``--no-cache``), then removed. The
host packages (docker.io, docker-compose, mmdebstrap) are installed into a throwaway
container of that base, as .ci/testbed-setup.sh would on a fresh host. A cold bring-up
is the sum: packages + base + image + the first bring-up.

Prints one line per measurement, in seconds. The machine is shared: figures vary.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from malleable.testbed import (
    Docker,
    Testbed,
    images,
    load_topology,
)

APT_PACKAGES = ("docker.io", "docker-compose", "mmdebstrap")


def _timed(what: str, fn: Callable[..., object], *args: object, **kwargs: object) -> float:
    start = time.monotonic()
    fn(*args, **kwargs)
    took = time.monotonic() - start
    print(f"{what:44} {took:8.1f} s", flush=True)
    return took


def cold(docker: Docker) -> float:
    """Build base and image from nothing under throwaway tags; return their total time."""
    tag = f"bench{os.getpid()}"
    base, repo = f"malleable-base:{tag}", f"malleable-testbed-{tag}"
    try:
        t_base = _timed("cold: base image (mmdebstrap + import)", images.build_base, docker, base)
        t_apt = _timed("cold: host packages (apt-get, in a container)", docker.docker_cmd,
                       "run", "--rm", base, "sh", "-c",
                       "apt-get update -q && apt-get install -y -q " + " ".join(APT_PACKAGES),
                       timeout=1200)
        t_img = _timed("cold: testbed image (docker build --no-cache)", images.ensure_image,
                       docker, base, repo=repo, no_cache=True)
    finally:
        tags = docker.docker_cmd("images", "--format", "{{.Repository}}:{{.Tag}}", repo,
                                 check=False).stdout.split()
        docker.docker_cmd("rmi", "--force", *tags, base, check=False, timeout=120)
    return t_apt + t_base + t_img


def bring_up(docker: Docker, topology_name: str, repeat: int) -> list[float]:
    topology = load_topology(topology_name)
    ups = []
    for i in range(repeat):
        tb = Testbed(f"bench{os.getpid()}-{i}", docker=docker)
        try:
            ups.append(_timed(f"warm: up {topology_name} ({topology.total_nodes} nodes)",
                              tb.up, topology))
            status = tb.status()
            if not (status.up and status.idle == topology.total_nodes):
                raise RuntimeError(f"testbed not ready after up: {status.to_json()}")
            _timed(f"      up again (health check only) {topology_name}", tb.up, topology)
        finally:
            _timed(f"      down {topology_name}", tb.down)
    return ups


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--topology", default="small,das3",
                        help="comma-separated topologies (default: small,das3)")
    parser.add_argument("--repeat", type=int, default=1, help="bring-ups per topology")
    parser.add_argument("--cold", action="store_true", help="also time building from nothing")
    args = parser.parse_args()
    docker = Docker()
    docker.require_engine()
    images.ensure_image(docker)  # warm figures need the images present
    build = cold(docker) if args.cold else None
    for name in args.topology.split(","):
        ups = bring_up(docker, name, max(1, args.repeat))
        print(f"{'warm: up ' + name + ' median':44} {statistics.median(ups):8.1f} s")
        if build is not None:
            print(f"{'cold: up ' + name + ' (packages+base+image+up)':44} "
                  f"{build + ups[0]:8.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
