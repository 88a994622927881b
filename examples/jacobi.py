"""Malleable Jacobi solver for a dense, diagonally dominant system A x = b (DMRlib's Jacobi).

Rows of A, b and x are distributed in blocks; each iteration gathers x and updates
the local rows: x_i <- (b_i - sum_{j != i} a_ij x_j) / a_ii. Every row is computed
the same way whatever the process count, so a run that grows and shrinks ends with
the same x as a fixed-size run.

    mpirun -n 2 python3 examples/jacobi.py --schedule 2,4,2 --iterations 30
"""

from __future__ import annotations

import numpy as np
from mpi4py import MPI

from malleable.mpi import Data, Malleable, block_counts, demo


def rows(n: int, start: int, stop: int) -> np.ndarray:
    """Rows [start, stop) of A: a_ij = 1 / (1 + |i - j|), a_ii = 1 + the row's other entries.

    Barely diagonally dominant, so Jacobi converges slowly and every iteration counts.
    """
    a = 1.0 / (1.0 + np.abs(np.arange(start, stop)[:, None] - np.arange(n)[None, :]))
    local, diagonal = np.arange(stop - start), np.arange(start, stop)
    a[local, diagonal] = 0.0
    a[local, diagonal] = 1.0 + a.sum(axis=1)
    return a


def init(comm: MPI.Comm, n: int) -> Data:
    counts = block_counts(n, comm.size)
    start = sum(counts[:comm.rank])
    stop = start + counts[comm.rank]
    b = np.sin(np.arange(start, stop) * 0.01) + 1.0
    return Data({"a": rows(n, start, stop), "b": b, "x": np.zeros(stop - start)})


def step(comm: MPI.Comm, data: Data, iteration: int) -> None:
    a, b, x = data["a"], data["b"], data["x"]
    full = demo.allgather(comm, x)
    start = sum(comm.allgather(len(x))[:comm.rank])
    diag = a[np.arange(len(x)), np.arange(start, start + len(x))]
    data["x"] = (b - a @ full + diag * x) / diag


def main() -> None:
    args = demo.parser(__doc__.splitlines()[0], iterations=30, size=256).parse_args()
    mall = Malleable(demo.params(args), demo.source(args), inhibitors=demo.inhibitors(args))
    data = mall.run(lambda comm: init(comm, args.size),
                    demo.slowed(step, args.delay, args.delay_file),
                    args.iterations, args.request)
    if data is None:
        return  # this process handed over to a new process set
    x = demo.allgather(mall.comm, data["x"])
    phases = mall.finish(args.iterations)
    if mall.rank == 0:
        if args.save is not None:
            np.save(args.save, x)
        demo.report(args, phases, float(x.sum()), "jacobi")


if __name__ == "__main__":
    main()
