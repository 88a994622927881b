"""Moving numpy arrays between the old and the new process set (an intercommunicator).

Everything goes as bytes (``MPI.BYTE``), so any dtype travels, structured records
included; the processes are assumed to share one byte order (one cluster).
Messages are cut in chunks of :data:`CHUNK` bytes to stay below MPI's 2 GiB count
limit; messages between one pair on one tag arrive in order, so chunks need no
numbering.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from malleable.mpi.layouts import Moves, selection_length

CHUNK = 1 << 28
"""Bytes per message (256 MiB)."""


def mpi() -> Any:
    """The ``mpi4py.MPI`` module, imported on first use (it initialises MPI)."""
    try:
        from mpi4py import MPI
    except ImportError as exc:  # pragma: no cover - depends on the installation
        raise ImportError("malleable.mpi needs mpi4py: pip install 'malleable[mpi]' "
                          "(or apt-get install python3-mpi4py)") from exc
    return MPI


def as_bytes(array: np.ndarray) -> npt.NDArray[np.uint8]:
    """A flat byte view of a C-contiguous array (no copy)."""
    if not array.flags.c_contiguous:
        raise ValueError("array must be C-contiguous to travel as bytes")
    flat: npt.NDArray[np.uint8] = array.reshape(-1).view(np.uint8)
    return flat


def _chunks(buf: npt.NDArray[np.uint8]) -> list[npt.NDArray[np.uint8]]:
    return [buf[i:i + CHUNK] for i in range(0, len(buf), CHUNK)]


class Outbox:
    """Non-blocking sends that keep their buffers alive until :meth:`wait`."""

    def __init__(self, comm: Any) -> None:
        self.comm = comm
        self.requests: list[Any] = []
        self.keep: list[np.ndarray] = []
        self.bytes = 0

    def send(self, array: np.ndarray, dest: int, tag: int) -> None:
        data = np.ascontiguousarray(array)
        self.keep.append(data)
        buf = as_bytes(data)
        self.bytes += len(buf)
        for piece in _chunks(buf):
            self.requests.append(self.comm.Isend([piece, mpi().BYTE], dest=dest, tag=tag))

    def send_moves(self, local: np.ndarray, moves: Moves, tag: int) -> None:
        """Send the selected elements of ``local`` to each destination in ``moves``."""
        for dest, sel in moves:
            self.send(local[sel], dest, tag)

    def wait(self) -> None:
        mpi().Request.Waitall(self.requests)
        self.requests.clear()
        self.keep.clear()


class Inbox:
    """Non-blocking receives into arrays; index selections are filled after :meth:`wait`."""

    def __init__(self, comm: Any) -> None:
        self.comm = comm
        self.requests: list[Any] = []
        self.scatter: list[tuple[np.ndarray, npt.NDArray[np.int64], np.ndarray]] = []
        self.bytes = 0

    def receive(self, into: np.ndarray, source: int, tag: int) -> None:
        """Receive into a C-contiguous array (or view) from ``source``."""
        buf = as_bytes(into)
        self.bytes += len(buf)
        for piece in _chunks(buf):
            self.requests.append(self.comm.Irecv([piece, mpi().BYTE], source=source, tag=tag))

    def receive_moves(self, local: np.ndarray, moves: Moves, tag: int) -> None:
        """Fill ``local`` at each selection from the matching source in ``moves``."""
        for source, sel in moves:
            if isinstance(sel, slice):
                self.receive(local[sel], source, tag)
            else:
                tmp = np.empty((selection_length(sel), *local.shape[1:]), dtype=local.dtype)
                self.receive(tmp, source, tag)
                self.scatter.append((local, sel, tmp))

    def wait(self) -> None:
        mpi().Request.Waitall(self.requests)
        self.requests.clear()
        for local, sel, tmp in self.scatter:
            local[sel] = tmp
        self.scatter.clear()


def empty_local(dtype: np.dtype[Any], tail: Sequence[int], moves: Moves) -> np.ndarray:
    """A new local array large enough for the elements ``moves`` brings."""
    length = sum(selection_length(sel) for _, sel in moves)
    return np.empty((length, *tail), dtype=dtype)
