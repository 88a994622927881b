"""Malleable N-body (direct summation) with particles as a structured numpy dtype.

Particles (id, position, velocity, mass) are records, like DMRlib's N-body. On a
resize they move with user callbacks: each old process sends every particle to the
new process that owns its slab of the x axis (a domain decomposition, which the
predefined block patterns cannot express). Each step gathers all particles, sorts
them by id (so forces are summed in the same order at any process count) and
advances the local ones with a leapfrog step.

    mpirun -n 2 python3 examples/nbody.py --schedule 2,3,1 --iterations 12
"""

from __future__ import annotations

import numpy as np
from mpi4py import MPI

from malleable.mpi import Callbacks, Data, Handover, Malleable, block_counts, demo

PARTICLE = np.dtype([("id", np.int64), ("pos", np.float64, (3,)), ("vel", np.float64, (3,)),
                     ("mass", np.float64)])
DT, SOFTENING = 1e-3, 1e-2


def init(comm: MPI.Comm, n: int) -> Data:
    rng = np.random.default_rng(42)
    everyone = np.zeros(n, dtype=PARTICLE)
    everyone["id"] = np.arange(n)
    everyone["pos"] = rng.uniform(-1.0, 1.0, size=(n, 3))
    everyone["mass"] = rng.uniform(0.5, 1.5, size=n) / n
    counts = block_counts(n, comm.size)
    start = sum(counts[:comm.rank])
    return Data({"particles": everyone[start:start + counts[comm.rank]].copy()})


def send_slabs(h: Handover, local: np.ndarray) -> None:
    """Old side: particle -> the new rank whose slab of x holds it."""
    x = local["pos"][:, 0]
    lo = h.comm.allreduce(float(x.min()) if len(x) else np.inf, op=MPI.MIN)
    hi = h.comm.allreduce(float(x.max()) if len(x) else -np.inf, op=MPI.MAX)
    width = max(hi - lo, 1e-300)
    dest = np.clip(((x - lo) / width * h.new_size).astype(np.int64), 0, h.new_size - 1)
    h.send_by_destination(local, dest)


def receive_slab(h: Handover) -> np.ndarray:
    return h.receive_from_all()


SLABS = Callbacks(send_slabs, receive_slab)


def accelerations(local: np.ndarray, everyone: np.ndarray) -> np.ndarray:
    diff = everyone["pos"][None, :, :] - local["pos"][:, None, :]
    r2 = (diff ** 2).sum(axis=2) + SOFTENING ** 2
    weight = everyone["mass"][None, :] / r2 ** 1.5
    acc: np.ndarray = (diff * weight[:, :, None]).sum(axis=1)
    return acc


def step(comm: MPI.Comm, data: Data, iteration: int) -> None:
    local = data["particles"]
    everyone = demo.allgather(comm, local)
    everyone = everyone[np.argsort(everyone["id"], kind="stable")]
    local["vel"] += DT * accelerations(local, everyone)
    local["pos"] += DT * local["vel"]


def main() -> None:
    args = demo.parser(__doc__.splitlines()[0], iterations=12, size=256).parse_args()
    mall = Malleable(demo.params(args), demo.source(args), inhibitors=demo.inhibitors(args),
                     layouts={"particles": SLABS})
    data = mall.run(lambda comm: init(comm, args.size),
                    demo.slowed(step, args.delay, args.delay_file),
                    args.iterations, args.request)
    if data is None:
        return
    everyone = demo.allgather(mall.comm, data["particles"])
    everyone = everyone[np.argsort(everyone["id"])]
    phases = mall.finish(args.iterations)
    if mall.rank == 0:
        if args.save is not None:
            np.save(args.save, everyone["pos"])
        demo.report(args, phases, float(everyone["pos"].sum()), "nbody")


if __name__ == "__main__":
    main()
