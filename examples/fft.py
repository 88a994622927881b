"""Malleable 2-D FFT filter that runs only on powers of two (like NAS FT in KOALA).

An N x N complex field is distributed in blocks of rows. Each iteration applies one
step of the heat equation in Fourier space: a 2-D FFT (row FFTs, a global
transpose with Alltoall, row FFTs), a Gaussian damping of each mode, and the
inverse. The transpose needs the process count to divide N, so the program takes
only powers of two: offered 5 processes it takes 4 and gives the fifth back. The
checksum is the field's energy (sum of squares), which the damping lowers each step.

    mpirun -n 2 python3 examples/fft.py --schedule 2,5 --iterations 10
"""

from __future__ import annotations

import numpy as np
from mpi4py import MPI

from malleable.model import SizeRule
from malleable.mpi import Data, Malleable, block_counts, demo

NU_DT = 1e-4


def transpose(comm: MPI.Comm, local: np.ndarray) -> np.ndarray:
    """Rows of the global transpose (local is m x N, m = N / P)."""
    m, n = local.shape
    p = comm.size
    send = np.ascontiguousarray(local.reshape(m, p, m).transpose(1, 0, 2))
    recv = np.empty_like(send)
    comm.Alltoall(send, recv)
    out: np.ndarray = recv.transpose(2, 0, 1).reshape(m, n)
    return np.ascontiguousarray(out)


def damping(comm: MPI.Comm, n: int) -> np.ndarray:
    """exp(-nu dt |k|^2) for this process's rows of the (transposed) spectrum."""
    k = np.fft.fftfreq(n, d=1.0 / n)
    m = n // comm.size
    rows = k[comm.rank * m:(comm.rank + 1) * m]
    result: np.ndarray = np.exp(-NU_DT * (rows[:, None] ** 2 + k[None, :] ** 2))
    return result


def init(comm: MPI.Comm, n: int) -> Data:
    if n % comm.size:
        raise ValueError(f"{comm.size} processes do not divide {n} rows")
    counts = block_counts(n, comm.size)
    start = sum(counts[:comm.rank])
    y = np.arange(start, start + counts[comm.rank])[:, None] / n
    x = np.arange(n)[None, :] / n
    field = np.sin(2 * np.pi * 3 * x) * np.cos(2 * np.pi * 5 * y) + (x > 0.5) * (y < 0.25)
    return Data({"u": field.astype(np.complex128)})


def step(comm: MPI.Comm, data: Data, iteration: int) -> None:
    u = data["u"]
    n = u.shape[1]
    spectrum = np.fft.fft(transpose(comm, np.fft.fft(u, axis=1)), axis=1)
    spectrum *= damping(comm, n)
    back = np.fft.ifft(transpose(comm, np.fft.ifft(spectrum, axis=1)), axis=1)
    data["u"] = back


def main() -> None:
    args = demo.parser(__doc__.splitlines()[0], iterations=10, size=64).parse_args()
    mall = Malleable(demo.params(args, SizeRule.POW2), demo.source(args),
                     inhibitors=demo.inhibitors(args))
    data = mall.run(lambda comm: init(comm, args.size),
                    demo.slowed(step, args.delay, args.delay_file),
                    args.iterations, args.request)
    if data is None:
        return
    u = demo.allgather(mall.comm, data["u"])
    phases = mall.finish(args.iterations)
    if mall.rank == 0:
        if args.save is not None:
            np.save(args.save, u.real)
        demo.report(args, phases, float((u.real ** 2).sum()), "fft")


if __name__ == "__main__":
    main()
