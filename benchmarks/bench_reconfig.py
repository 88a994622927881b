"""Reconfiguration time of malleable.mpi against data size and process counts, beside
checkpoint-to-disk + restart at the new size.

For each data size (a float64 array in blocks, total bytes) and each resize p -> q:

* **spawn**: ``mpirun -n p`` runs a program that resizes once through
  :class:`malleable.mpi.Malleable` (``MPI_Comm_spawn`` of q processes, block
  redistribution over the intercommunicator, old processes leave). Time from the
  decision to the q new processes holding their data; of which the spawn.
* **checkpoint**: ``mpirun -n p`` writes each block to its own ``.npy`` file
  (fsync'ed) and exits; then ``mpirun -n q`` starts and each process reads the
  slices it needs. Time from the start of the write to the q processes holding
  their data (the restart's launch included, as the spawn's is above).

Run it on this host (prints a table; ``--json`` for one JSON object)::

    python3 benchmarks/bench_reconfig.py                  # 1 MiB .. 1 GiB, 4 resizes
    python3 benchmarks/bench_reconfig.py --sizes 1,16 --pairs 2:4

Sizes whose run would need more than half the available memory are skipped and
listed. The checkpoint files go to --dir (default: a temporary directory on the
disk of this host); a restart reads them back from the page cache, so this is the
checkpoint's best case. Every resize checks the data it receives.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
MIB = 1 << 20
DEFAULT_SIZES = "1,4,16,64,256,1024"
DEFAULT_PAIRS = "1:2,2:4,4:2,2:3"
TIMEOUT = 900.0


# ----------------------------------------------------------------------------- workers


def _local_block(comm: Any, total: int) -> tuple[int, np.ndarray]:
    from malleable.mpi import block_counts

    counts = block_counts(total, comm.size)
    start = sum(counts[:comm.rank])
    return start, np.arange(start, start + counts[comm.rank], dtype=np.float64)


def _check(comm: Any, start: int, local: np.ndarray) -> None:
    expected = np.arange(start, start + len(local), dtype=np.float64)
    bad = comm.allreduce(int(not np.array_equal(local, expected)))
    if bad:
        raise RuntimeError(f"{bad} processes received wrong data")


def worker_spawn(args: argparse.Namespace) -> None:
    from malleable.mpi import Data, Malleable, Params, Scripted, block_counts

    total = args.bytes // 8
    mall = Malleable(Params(1, 1024), Scripted({1: args.to}))

    def init(comm: Any) -> Data:
        return Data({"x": _local_block(comm, total)[1]})

    data = mall.run(init, lambda comm, data, i: None, 2)
    if data is None:
        return
    start = sum(block_counts(total, mall.size)[:mall.rank])
    _check(mall.comm, start, data["x"])
    phase = mall.finish(2)[-1]
    if mall.rank == 0:
        Path(args.out).write_text(json.dumps({"seconds": phase["reconfig_seconds"],
                                              "spawn_seconds": phase["spawn_seconds"],
                                              "size": mall.size}))


def worker_checkpoint(args: argparse.Namespace) -> None:
    from mpi4py import MPI

    comm = MPI.COMM_WORLD
    _, local = _local_block(comm, args.bytes // 8)
    comm.Barrier()
    t0 = comm.bcast(time.time(), root=0)
    path = Path(args.dir) / f"part-{comm.rank}.npy"
    with path.open("wb") as out:
        np.save(out, local)
        out.flush()
        os.fsync(out.fileno())
    lengths = comm.gather(len(local), root=0)
    comm.Barrier()
    if comm.rank == 0:
        meta = {"t0": t0, "lengths": lengths, "write_seconds": time.time() - t0}
        (Path(args.dir) / "meta.json").write_text(json.dumps(meta))


def worker_restart(args: argparse.Namespace) -> None:
    from mpi4py import MPI

    from malleable.mpi import Block

    comm = MPI.COMM_WORLD
    meta = json.loads((Path(args.dir) / "meta.json").read_text())
    lengths = meta["lengths"]
    layout = Block()
    receives = layout.receives(lengths, comm.size, comm.rank)
    local = np.empty(sum(s.stop - s.start for _, s in receives))  # type: ignore[union-attr]
    for src, dst in receives:
        src_sel = dict(layout.sends(lengths, comm.size, src))[comm.rank]
        part = np.load(Path(args.dir) / f"part-{src}.npy", mmap_mode="r")
        local[dst] = part[src_sel]
    bounds = np.cumsum([0, *layout.local_lengths(sum(lengths), comm.size)])
    _check(comm, int(bounds[comm.rank]), local)
    comm.Barrier()
    if comm.rank == 0:
        Path(args.out).write_text(json.dumps({"seconds": time.time() - meta["t0"],
                                              "write_seconds": meta["write_seconds"]}))


WORKERS = {"spawn": worker_spawn, "checkpoint": worker_checkpoint, "restart": worker_restart}


# ----------------------------------------------------------------------------- driver


def mpi_env() -> dict[str, str]:
    env = dict(os.environ)
    env.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
    env.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    env.setdefault("OMPI_MCA_btl_vader_single_copy_mechanism", "none")
    env.setdefault("OMPI_MCA_btl_tcp_if_include", "lo")
    env.setdefault("OMPI_MCA_oob_tcp_if_include", "lo")
    env.setdefault("OMPI_MCA_mpi_yield_when_idle", "1")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT / "src"),
                                                      env.get("PYTHONPATH", "")]))
    return env


def mpirun(n: int, *worker_args: str) -> None:
    argv = ["mpirun", "--oversubscribe", "-n", str(n), sys.executable, str(Path(__file__)),
            "--worker", *worker_args]
    proc = subprocess.run(argv, env=mpi_env(), capture_output=True, text=True, timeout=TIMEOUT,
                          check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} failed ({proc.returncode}):\n"
                           f"{proc.stdout[-2000:]}{proc.stderr[-2000:]}")


def measure(size: int, p: int, q: int, work: Path) -> dict[str, float]:
    out = work / "result.json"
    mpirun(p, "spawn", "--bytes", str(size), "--to", str(q), "--out", str(out))
    spawn = json.loads(out.read_text())
    ckpt = work / "ckpt"
    ckpt.mkdir(exist_ok=True)
    mpirun(p, "checkpoint", "--bytes", str(size), "--dir", str(ckpt))
    mpirun(q, "restart", "--dir", str(ckpt), "--out", str(out))
    restart = json.loads(out.read_text())
    shutil.rmtree(ckpt)
    return {"spawn_total": spawn["seconds"], "spawn_start": spawn["spawn_seconds"],
            "ckpt_total": restart["seconds"], "ckpt_write": restart["write_seconds"]}


def available_memory() -> int:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 1 << 62


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default=DEFAULT_SIZES, help="total data sizes in MiB")
    p.add_argument("--pairs", default=DEFAULT_PAIRS, help="resizes as p:q pairs")
    p.add_argument("--repeat", type=int, default=1, help="runs per point (the median is shown)")
    p.add_argument("--dir", type=Path, help="where checkpoints go (default: a temporary dir)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.add_argument("--worker", choices=list(WORKERS), help=argparse.SUPPRESS)
    p.add_argument("--bytes", type=int, help=argparse.SUPPRESS)
    p.add_argument("--to", type=int, help=argparse.SUPPRESS)
    p.add_argument("--out", help=argparse.SUPPRESS)
    return p.parse_args(argv)


def run_all(args: argparse.Namespace) -> dict[str, Any]:
    from rich.progress import Progress

    sizes = [int(float(s) * MIB) for s in args.sizes.split(",")]
    pairs = [tuple(int(x) for x in pair.split(":")) for pair in args.pairs.split(",")]
    budget = available_memory() // 2
    skipped = [s // MIB for s in sizes if 3 * s > budget]
    sizes = [s for s in sizes if 3 * s <= budget]
    rows: list[dict[str, Any]] = []
    base = Path(tempfile.mkdtemp(prefix="bench-reconfig-", dir=args.dir))
    try:
        with Progress(transient=True) as bar:
            task = bar.add_task("resizing", total=len(sizes) * len(pairs) * args.repeat)
            for size in sizes:
                for p, q in pairs:
                    runs = []
                    for _ in range(args.repeat):
                        runs.append(measure(size, p, q, base))
                        bar.advance(task)
                    med = {k: float(np.median([r[k] for r in runs])) for k in runs[0]}
                    rows.append({"mib": size / MIB, "from": p, "to": q, **med})
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return {"rows": rows, "skipped_mib": skipped, "cpus": os.cpu_count(),
            "load": os.getloadavg()[0], "repeat": args.repeat}


def print_table(report: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"reconfiguration time (s), median of {report['repeat']}")
    for col in ("MiB", "p->q", "spawn+move", "(spawn)", "ckpt+restart", "(write)",
                "ckpt/spawn"):
        table.add_column(col, justify="right", no_wrap=True)
    for r in report["rows"]:
        table.add_row(f"{r['mib']:g}", f"{r['from']}->{r['to']}", f"{r['spawn_total']:.2f}",
                      f"{r['spawn_start']:.2f}", f"{r['ckpt_total']:.2f}",
                      f"{r['ckpt_write']:.2f}", f"{r['ckpt_total'] / r['spawn_total']:.2f}")
    console = Console()
    console.print(table)
    console.print(f"{report['cpus']} CPUs, load average {report['load']:.1f} at the end")
    if report["skipped_mib"]:
        console.print(f"skipped (memory): {report['skipped_mib']} MiB")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.worker:
        WORKERS[args.worker](args)
        return 0
    if shutil.which("mpirun") is None:
        print("bench_reconfig: mpirun not found (apt-get install openmpi-bin)", file=sys.stderr)
        return 2
    report = run_all(args)
    if args.json:
        print(json.dumps(report))
    else:
        print_table(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
