"""Test program: checks every redistribution at every iteration, with its own loop.

Arrays of known global content (block floats, block-cyclic ints, rows of a matrix,
structured particles moved by callbacks) are verified against the layout expected
at the current process count; the number of wrong elements is summed over the run
and written as the checksum. With ``--channel`` the program runs until the test
writes a ``stop`` file there, and asks for 3 processes itself at iteration 2.
"""

from __future__ import annotations

import time

import numpy as np
from mpi4py import MPI

from malleable.mpi import Block, BlockCyclic, Callbacks, Data, Handover, Malleable, demo
from malleable.mpi.layouts import offsets

PARTICLE = np.dtype([("id", np.int64), ("pos", np.float64, (3,)), ("mass", np.float64)])
N, M, R, P, CYCLIC = 37, 29, 11, 23, BlockCyclic(3)


def by_id(h: Handover, local: np.ndarray) -> None:
    h.send_by_destination(local, local["id"] % h.new_size)


def expected(comm: MPI.Comm) -> Data:
    q, r = comm.size, comm.rank
    blk = offsets(Block().local_lengths(N, q))
    rows = offsets(Block().local_lengths(R, q))
    cyc = np.arange(M)[np.concatenate([np.arange(M)[b * 3:(b + 1) * 3]
                                       for b in range(r, -(-M // 3), q)] or [[]]).astype(int)]
    parts = np.zeros(P, dtype=PARTICLE)
    parts["id"] = np.arange(P)
    parts["pos"] = np.arange(P)[:, None] * [1.0, 2.0, 3.0]
    parts["mass"] = 1.0 + np.arange(P)
    matrix = np.arange(R * 4, dtype=np.float64).reshape(R, 4)
    return Data({"blk": np.arange(N, dtype=np.float64)[blk[r]:blk[r + 1]] * 0.5,
                 "cyc": cyc.astype(np.int64), "rows": matrix[rows[r]:rows[r + 1]],
                 "parts": parts[parts["id"] % q == r]})


def init(comm: MPI.Comm) -> Data:
    """Start from the block layout of everything (particles too), errors = 0."""
    data = expected(comm)
    parts = np.zeros(P, dtype=PARTICLE)
    parts["id"] = np.arange(P)
    parts["pos"] = np.arange(P)[:, None] * [1.0, 2.0, 3.0]
    parts["mass"] = 1.0 + np.arange(P)
    bounds = offsets(Block().local_lengths(P, comm.size))
    data["parts"] = parts[bounds[comm.rank]:bounds[comm.rank + 1]]
    data.shared["errors"] = 0
    return data


def wrong(comm: MPI.Comm, data: Data, first: bool) -> int:
    want = expected(comm)
    bad = 0
    for name in ("blk", "cyc", "rows"):
        got, exp = data[name], want[name]
        bad += int(got.shape != exp.shape or not np.array_equal(got, exp))
    if not first:  # before the first resize the particles are in blocks
        got = np.sort(data["parts"], order="id")
        bad += int(not np.array_equal(got, want["parts"]))
    return int(comm.allreduce(bad, op=MPI.SUM))


def stop_requested(comm: MPI.Comm, args: object) -> bool:
    channel = getattr(args, "channel", None)
    flag = bool(channel is not None and comm.rank == 0 and (channel / "stop").exists())
    return bool(comm.bcast(flag, root=0))


def main() -> None:
    parser = demo.parser(__doc__.splitlines()[0], iterations=12, size=0)
    args = parser.parse_args()
    mall = Malleable(demo.params(args), demo.source(args), inhibitors=demo.inhibitors(args),
                     layouts={"cyc": CYCLIC, "parts": Callbacks(by_id, Handover.receive_from_all)})
    resumed = mall.resume()
    iteration, data = resumed if resumed is not None else (0, init(mall.comm))
    endless = args.channel is not None
    while endless or iteration < args.iterations:
        if endless and stop_requested(mall.comm, args):
            break
        kept = mall.reconfigure(iteration, data)
        if kept is None:
            return
        data = kept
        data.shared["errors"] += wrong(mall.comm, data, mall.phases[0]["size"] == mall.size
                                       and len(mall.phases) == 1)
        if endless and iteration == 2:
            mall.request(3, iteration)
        if args.delay:
            time.sleep(args.delay)
        iteration += 1
    phases = mall.finish(iteration)
    if mall.rank == 0:
        demo.report(args, phases, float(data.shared["errors"]), "check")


if __name__ == "__main__":
    main()
