"""Malleable conjugate gradient for a dense symmetric positive definite system (DMRlib's CG).

Rows of A and the vectors b, x, r, p are distributed in blocks; the scalar r.r is
replicated. Dot products are reduced over the current process set, so a run that
grows and shrinks differs from a fixed-size run only by rounding.

    mpirun -n 2 python3 examples/cg.py --schedule 2,4,2 --iterations 30
"""

from __future__ import annotations

import numpy as np
from mpi4py import MPI

from malleable.mpi import Data, Malleable, block_counts, demo


def rows(n: int, start: int, stop: int) -> np.ndarray:
    """Rows [start, stop) of A: a_ij = 1 / (1 + |i - j|), a_ii = 1 + sum of the row."""
    i = np.arange(start, stop)[:, None]
    a = 1.0 / (1.0 + np.abs(i - np.arange(n)[None, :]))
    local = np.arange(stop - start)
    a[local, np.arange(start, stop)] = 0.0
    a[local, np.arange(start, stop)] = 1.0 + a.sum(axis=1)
    return a


def dot(comm: MPI.Comm, u: np.ndarray, v: np.ndarray) -> float:
    return float(comm.allreduce(float(u @ v), op=MPI.SUM))


def init(comm: MPI.Comm, n: int) -> Data:
    counts = block_counts(n, comm.size)
    start = sum(counts[:comm.rank])
    stop = start + counts[comm.rank]
    b = np.cos(np.arange(start, stop) * 0.05)
    data = Data({"a": rows(n, start, stop), "b": b, "x": np.zeros(stop - start),
                 "r": b.copy(), "p": b.copy()})
    data.shared["rr"] = dot(comm, b, b)
    return data


def step(comm: MPI.Comm, data: Data, iteration: int) -> None:
    rr = data.shared["rr"]
    if rr == 0.0:
        return  # converged exactly
    ap = data["a"] @ demo.allgather(comm, data["p"])
    alpha = rr / dot(comm, data["p"], ap)
    data["x"] = data["x"] + alpha * data["p"]
    data["r"] = data["r"] - alpha * ap
    rr_new = dot(comm, data["r"], data["r"])
    data["p"] = data["r"] + (rr_new / rr) * data["p"]
    data.shared["rr"] = rr_new


def main() -> None:
    args = demo.parser(__doc__.splitlines()[0], iterations=30, size=256).parse_args()
    mall = Malleable(demo.params(args), demo.source(args), inhibitors=demo.inhibitors(args))
    data = mall.run(lambda comm: init(comm, args.size),
                    demo.slowed(step, args.delay, args.delay_file),
                    args.iterations, args.request)
    if data is None:
        return
    x = demo.allgather(mall.comm, data["x"])
    phases = mall.finish(args.iterations)
    if mall.rank == 0:
        if args.save is not None:
            np.save(args.save, x)
        print(f"cg residual r.r = {data.shared['rr']:.3e}")
        demo.report(args, phases, float(x.sum()), "cg")


if __name__ == "__main__":
    main()
