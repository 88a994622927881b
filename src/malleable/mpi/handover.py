"""Handing an application's state from the old process set to the new one.

The old processes (the parents) and the new ones (the children) share an
intercommunicator. The parents' rank 0 broadcasts a header (iteration, replicated
values, the source's state, the phase history, and for each distributed array its
dtype, row shape, layout and the old local lengths); then each array moves with
its layout (:mod:`malleable.mpi.layouts`) or with the user's :class:`Callbacks`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from malleable.mpi.layouts import Block, Layout
from malleable.mpi.transfer import Inbox, Outbox, empty_local, mpi


@dataclass
class Data:
    """What an iterative program carries from one iteration to the next.

    ``arrays`` are distributed along their first axis (each process holds its local
    part); ``shared`` holds values every process has the same copy of (rank 0's copy
    is handed over, pickled).
    """

    arrays: dict[str, np.ndarray] = field(default_factory=dict)
    shared: dict[str, Any] = field(default_factory=dict)

    def __getitem__(self, name: str) -> np.ndarray:
        return self.arrays[name]

    def __setitem__(self, name: str, value: np.ndarray) -> None:
        self.arrays[name] = value


@dataclass
class Handover:
    """What a user redistribution callback sees for one array."""

    intercomm: Any
    comm: Any
    """This side's own communicator (the old set's, or the new set's)."""
    parent: bool
    """True on the old processes (senders), False on the new ones."""
    rank: int
    old_size: int
    new_size: int
    name: str
    dtype: np.dtype[Any]
    tail: tuple[int, ...]
    tag: int

    def send_by_destination(self, local: np.ndarray, dest: np.ndarray) -> None:
        """Old side: send element ``i`` of ``local`` to new rank ``dest[i]`` (order kept)."""
        dest = np.asarray(dest, dtype=np.int64)
        if dest.shape != (len(local),) or (dest.size and (dest.min() < 0
                                                          or dest.max() >= self.new_size)):
            raise ValueError(f"{self.name}: need one destination in [0, {self.new_size}) "
                             f"per element, got shape {dest.shape}")
        order = np.argsort(dest, kind="stable")
        counts = np.bincount(dest, minlength=self.new_size).astype(np.int64)
        self.intercomm.Alltoall([counts, mpi().INT64_T],
                                [np.empty(self.new_size, np.int64), mpi().INT64_T])
        out = Outbox(self.intercomm)
        sorted_local = local[order]
        starts = np.concatenate(([0], np.cumsum(counts)))
        for d in range(self.new_size):
            if counts[d]:
                out.send(sorted_local[starts[d]:starts[d + 1]], d, self.tag)
        out.wait()

    def receive_from_all(self) -> np.ndarray:
        """New side: receive what every old process sent here, in old-rank order."""
        counts = np.empty(self.old_size, np.int64)
        self.intercomm.Alltoall([np.zeros(self.old_size, np.int64), mpi().INT64_T],
                                [counts, mpi().INT64_T])
        local = np.empty((int(counts.sum()), *self.tail), dtype=self.dtype)
        starts = np.concatenate(([0], np.cumsum(counts)))
        inbox = Inbox(self.intercomm)
        for s in range(self.old_size):
            if counts[s]:
                inbox.receive(local[starts[s]:starts[s + 1]], s, self.tag)
        inbox.wait()
        return local


@dataclass(frozen=True)
class Callbacks:
    """A user redistribution: ``send(h, local)`` on each old process, ``recv(h)`` on each new one.

    Both get a :class:`Handover`; ``recv`` returns the new local array.
    :meth:`Handover.send_by_destination` and :meth:`Handover.receive_from_all` cover
    the common case "each element goes to a computed new rank".
    """

    send: Callable[[Handover, np.ndarray], None]
    recv: Callable[[Handover], np.ndarray]


Redistribution = Layout | Callbacks
"""How one array moves: a layout (Block, BlockCyclic) or user callbacks."""

_CALLBACKS = "callbacks"


def _describe(how: Redistribution) -> Any:
    """What the header says about a redistribution (a picklable layout, or a marker)."""
    return _CALLBACKS if isinstance(how, Callbacks) else how


def send_state(comm: Any, intercomm: Any, header: dict[str, Any], data: Data,
               declared: Mapping[str, Redistribution]) -> int:
    """Parents: send the header and every array; return the bytes this process sent."""
    names = sorted(data.arrays)
    hows = {name: declared.get(name, Block()) for name in names}
    lengths = comm.allgather([len(data.arrays[name]) for name in names])
    fields = []
    for i, name in enumerate(names):
        local = data.arrays[name]
        fields.append({"name": name, "dtype": local.dtype, "tail": tuple(local.shape[1:]),
                       "how": _describe(hows[name]), "lengths": [row[i] for row in lengths]})
    full = {**header, "shared": data.shared, "fields": fields}
    root = mpi().ROOT if comm.Get_rank() == 0 else mpi().PROC_NULL
    intercomm.bcast(full, root=root)
    q = intercomm.Get_remote_size()
    sent = 0
    for tag, spec in enumerate(fields, start=1):
        local = np.ascontiguousarray(data.arrays[spec["name"]])
        how = hows[spec["name"]]
        if isinstance(how, Callbacks):
            how.send(_handover(intercomm, comm, True, comm.Get_size(), q, spec, tag), local)
            continue
        out = Outbox(intercomm)
        out.send_moves(local, how.sends(spec["lengths"], q, comm.Get_rank()), tag)
        out.wait()
        sent += out.bytes
    return sent


def receive_state(comm: Any, parent: Any,
                  declared: Mapping[str, Redistribution]) -> tuple[dict[str, Any], Data]:
    """Children: receive the header and every array."""
    header: dict[str, Any] = parent.bcast(None, root=0)
    p, q, rank = parent.Get_remote_size(), comm.Get_size(), comm.Get_rank()
    data = Data(shared=dict(header.pop("shared")))
    for tag, spec in enumerate(header.pop("fields"), start=1):
        how = spec["how"]
        if how == _CALLBACKS:
            mine = declared.get(spec["name"])
            if not isinstance(mine, Callbacks):
                raise ValueError(f"array {spec['name']!r} was sent with callbacks but this "
                                 "program declares none for it")
            data.arrays[spec["name"]] = mine.recv(_handover(parent, comm, False, p, q, spec, tag))
            continue
        if not callable(getattr(how, "receives", None)):
            raise ValueError(f"array {spec['name']!r}: {how!r} is not a layout")
        moves = how.receives(spec["lengths"], q, rank)
        local = empty_local(spec["dtype"], spec["tail"], moves)
        inbox = Inbox(parent)
        inbox.receive_moves(local, moves, tag)
        inbox.wait()
        data.arrays[spec["name"]] = local
    return header, data


def _handover(intercomm: Any, comm: Any, parent: bool, p: int, q: int,
              spec: Mapping[str, Any], tag: int) -> Handover:
    return Handover(intercomm, comm, parent, comm.Get_rank(), p, q, spec["name"], spec["dtype"],
                    spec["tail"], tag)
