"""The malleable-application API: reconfiguration points for iterative mpi4py programs.

A program declares its :class:`~malleable.mpi.params.Params`, inhibitors, a
:class:`~malleable.mpi.sources.ResizeSource` and how its arrays move; then, at the
top of each iteration, it calls :meth:`Malleable.reconfigure`. On a resize the
library spawns the new process set (``MPI_Comm_spawn`` of the same program, on the
offered hosts), hands the state over through the intercommunicator and the old
processes leave; the new ones resume at the same iteration (DMRlib's Algorithm 1)::

    mall = Malleable(Params(2, 8, 4), Scripted.parse("2,4,2", 30))
    result = mall.run(init, step, iterations=30)   # None on processes that left

or, with a loop of one's own::

    resumed = mall.resume()
    iteration, data = resumed if resumed else (0, init(mall.comm))
    while iteration < total:
        kept = mall.reconfigure(iteration, data)
        if kept is None:
            return            # handed over: this process leaves
        data = kept
        ...                   # compute on mall.comm
        iteration += 1
    mall.finish(iteration)
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from malleable.mpi.handover import Data, Redistribution, receive_state, send_state
from malleable.mpi.params import CheckClock, Inhibitors, Outcome, Params
from malleable.mpi.sources import Offer, Point, Report, ResizeSource
from malleable.mpi.transfer import mpi

logger = logging.getLogger(__name__)

#: Seconds a resize may spend in ``MPI_Comm_spawn`` before the application aborts; the
#: default when neither ``spawn_timeout`` nor ``$MALLEABLE_SPAWN_TIMEOUT`` says otherwise.
SPAWN_TIMEOUT = 120.0
#: The exit code of an application aborted by the spawn watchdog (``EX_TEMPFAIL``: the
#: same run started again normally works).
EXIT_SPAWN_HUNG = 75


def spawn_timeout_setting(value: float | None = None) -> float | None:
    """The spawn watchdog's limit in seconds, or None for no watchdog.

    ``value`` wins; else ``$MALLEABLE_SPAWN_TIMEOUT``; else :data:`SPAWN_TIMEOUT`. Zero
    turns the watchdog off.
    """
    if value is None:
        text = os.environ.get("MALLEABLE_SPAWN_TIMEOUT", "").strip()
        try:
            value = float(text) if text else SPAWN_TIMEOUT
        except ValueError:
            raise ValueError(f"MALLEABLE_SPAWN_TIMEOUT={text!r} is not a number of seconds: "
                             "set it to 0 (no watchdog) or a positive number") from None
    if value < 0:
        raise ValueError(f"spawn timeout {value} s is negative: give 0 (no watchdog) or more")
    return value or None


@dataclass(frozen=True, slots=True)
class Decision:
    """What rank 0 tells every process at a check: the offer and the size accepted."""

    offer: Offer
    accepted: int


def rank_hosts(hosts: Sequence[str]) -> list[str]:
    """One host per rank from ``"host"`` / ``"host:k"`` entries, in order."""
    ranks: list[str] = []
    for entry in hosts:
        name, _, count = entry.partition(":")
        try:
            k = int(count) if count else 1
        except ValueError:
            raise ValueError(f"bad host entry {entry!r}: write host or host:count") from None
        if not name or k < 1:
            raise ValueError(f"bad host entry {entry!r}: write host or host:count")
        ranks.extend([name] * k)
    return ranks


def hostfile_text(offer: Offer, accepted: int) -> str:
    """The lines of the hostfile for ``accepted`` processes: the first slots of the offer.

    Slots beyond ``accepted`` are given back (a power-of-two program offered 5 takes
    the first 4). Empty when the offer names no hosts.
    """
    ranks = rank_hosts(offer.hosts)
    if ranks and len(ranks) < accepted:
        raise ValueError(f"the offer lists {len(ranks)} slots for {accepted} processes")
    return "".join(f"{host}\n" for host in ranks[:accepted])


def default_command() -> list[str]:
    """How this program was started: the interpreter and its original arguments."""
    argv = list(getattr(sys, "orig_argv", []))[1:] or list(sys.argv)
    if not argv or argv[0] in ("", "-c"):
        raise ValueError("cannot tell how to start this program again: pass command=[...]")
    return [sys.executable, *argv]


class Malleable:
    """One process's view of a malleable application (create it on every rank).

    ``layouts`` says how each distributed array moves (Block when not named);
    ``command`` is what the new processes run (default: this program again, same
    arguments); ``spawn_info`` adds MPI info keys for ``MPI_Comm_spawn``.

    ``spawn_timeout`` bounds a resize's ``MPI_Comm_spawn`` (see :meth:`_spawn`): past it,
    rank 0 reports the resize failed to the source and aborts the application with exit
    code :data:`EXIT_SPAWN_HUNG`. Default: ``$MALLEABLE_SPAWN_TIMEOUT`` or
    :data:`SPAWN_TIMEOUT`; 0 means no limit.
    """

    def __init__(self, params: Params, source: ResizeSource, *,
                 inhibitors: Inhibitors | None = None,
                 layouts: Mapping[str, Redistribution] | None = None,
                 command: Sequence[str] | None = None,
                 spawn_info: Mapping[str, str] | None = None,
                 spawn_timeout: float | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        MPI = mpi()
        self.params = params
        self.source = source
        self.layouts = dict(layouts or {})
        self.command = list(command) if command else default_command()
        self.spawn_info = dict(spawn_info or {})
        self.spawn_timeout = spawn_timeout_setting(spawn_timeout)
        self.clock = clock
        self.checks = CheckClock(inhibitors or Inhibitors())
        self.comm: Any = MPI.COMM_WORLD
        self.parent: Any = MPI.Comm.Get_parent()
        self.outcome = Outcome.CONTINUE
        self.phases: list[dict[str, Any]] = []
        self.started = time.time()
        self.finished = False

    @property
    def rank(self) -> int:
        return int(self.comm.Get_rank())

    @property
    def size(self) -> int:
        return int(self.comm.Get_size())

    @property
    def spawned(self) -> bool:
        """True in a process set started by a resize."""
        return bool(self.parent != mpi().COMM_NULL)

    # ---------------------------------------------------------------- start and resume

    def resume(self) -> tuple[int, Data] | None:
        """On a spawned set: take over the state (iteration, data); on the first set: None."""
        if not self.spawned:
            self._begin_phase(0, 0.0)
            self._record("start", 0)
            return None
        header, data = receive_state(self.comm, self.parent, self.layouts)
        self.parent.Disconnect()
        self.comm.Barrier()
        seconds = time.time() - float(header["t0"])
        iteration = int(header["iteration"])
        self.phases = list(header["phases"])
        self.checks.checked(iteration, self.clock())
        self._begin_phase(iteration, seconds, float(header["spawn_seconds"]))
        if self.rank == 0:
            self.source.restore(header["source"])
            self.source.completed(Report(int(header["seq"]), self.size, iteration, seconds))
            self._record("resize", iteration, previous=int(header["previous"]), seconds=seconds,
                         spawn_seconds=float(header["spawn_seconds"]), seq=int(header["seq"]))
        return iteration, data

    def _begin_phase(self, iteration: int, seconds: float, spawn: float = 0.0) -> None:
        self.phases.append({"size": self.size, "iteration": iteration, "time": time.time(),
                            "reconfig_seconds": seconds, "spawn_seconds": spawn})

    def _record(self, event: str, iteration: int, **extra: Any) -> None:
        if self.rank == 0:
            self.source.record({"event": event, "iteration": iteration, "size": self.size,
                                **extra})

    # ---------------------------------------------------------------- the point

    def reconfigure(self, iteration: int, data: Data) -> Data | None:
        """The reconfiguration point, at the top of iteration ``iteration`` (collective).

        Returns ``data`` to carry on with, or None when this process handed its state
        to a new process set and must leave (return from the program).
        """
        self.outcome = Outcome.CONTINUE
        if not self.checks.iteration_due(iteration):
            return data
        self.checks.last_iteration = iteration
        decision = self._decide(iteration)
        if decision is None or decision.accepted == self.size:
            return data
        t0 = time.time()
        intercomm = self._spawn(decision, iteration)
        if intercomm is None:
            return data
        header = {"iteration": iteration, "seq": decision.offer.seq, "t0": t0,
                  "spawn_seconds": time.time() - t0, "previous": self.size,
                  "phases": self.phases,
                  "source": self.source.snapshot() if self.rank == 0 else {}}
        send_state(self.comm, intercomm, header, data, self.layouts)
        intercomm.Disconnect()
        self.outcome = Outcome.EXPAND if decision.accepted > self.size else Outcome.SHRINK
        logger.info("rank %d: handed over to %d processes at iteration %d", self.rank,
                    decision.accepted, iteration)
        return None

    def _decide(self, iteration: int) -> Decision | None:
        """Rank 0 consults the source (when the period allows) and tells everyone."""
        decision: Decision | None = None
        if self.rank == 0:
            decision = self._poll(iteration)
        shared: Decision | None = self.comm.bcast(decision, root=0)
        return shared

    def _poll(self, iteration: int) -> Decision | None:
        now = self.clock()
        if not self.checks.time_due(now):
            return None
        self.checks.checked(iteration, now)
        point = Point(iteration, self.size, self.params, time.time() - self.started)
        try:
            offer = self.source.poll(point)
            if offer is None:
                return None
            slots = len(rank_hosts(offer.hosts)) if offer.hosts else offer.target
        except (OSError, ValueError) as exc:  # the other ranks wait: never raise here
            logger.error("iteration %d: resize source failed: %s", iteration, exc)
            return None
        accepted = self.params.accept(self.size, min(offer.target, slots))
        self.source.answered(offer, point, accepted)
        if accepted == self.size:
            self.source.completed(Report(offer.seq, self.size, iteration))
        return Decision(offer, accepted)

    def _spawn(self, decision: Decision, iteration: int) -> Any:
        """Start the new process set; None (and a failure report) if MPI refuses.

        A spawn that does not return within ``spawn_timeout`` (Open MPI 4.1 with PMIx 4
        hangs in it now and then, openpmix/openpmix#2735) cannot be taken back: every
        process waits in the collective call. Rank 0's watchdog then reports the resize
        failed to the source (so the manager withdraws the offer and frees its nodes) and
        aborts the application, which the manager sees end; a hang holding the nodes until
        the time limit becomes a failure at once, with one line saying why.
        """
        MPI = mpi()
        info = MPI.Info.Create()
        hostfile = self._hostfile(decision)
        values = {"wdir": os.getcwd(), **self.spawn_info}
        if hostfile:  # rank i on line i, hosts mpirun does not know yet added
            values.update({"add-hostfile": hostfile, "mapper": "seq"})
        for key, value in values.items():
            info.Set(key, value)
        watchdog = self._watchdog(decision, iteration)
        try:
            return self.comm.Spawn(self.command[0], args=self.command[1:],
                                   maxprocs=decision.accepted, info=info, root=0)
        except MPI.Exception as exc:
            logger.error("spawning %d processes failed: %s", decision.accepted, exc)
            if self.rank == 0:
                self.source.completed(Report(decision.offer.seq, self.size, iteration,
                                             error=f"spawn failed: {exc}"))
            return None
        finally:
            if watchdog is not None:
                watchdog.cancel()
            info.Free()
            if hostfile and self.rank == 0:
                with contextlib.suppress(OSError):
                    os.unlink(hostfile)

    def _watchdog(self, decision: Decision, iteration: int) -> threading.Timer | None:
        """Rank 0's timer that ends a hung spawn (mpi4py releases the GIL in Spawn)."""
        if self.spawn_timeout is None or self.rank != 0:
            return None
        timer = threading.Timer(self.spawn_timeout, self._spawn_hung,
                                (decision, iteration, self.spawn_timeout))
        timer.daemon = True
        timer.start()
        return timer

    def _spawn_hung(self, decision: Decision, iteration: int, timeout: float) -> None:
        message = (f"spawning {decision.accepted} processes hung for {timeout:g} s at "
                   f"iteration {iteration} (Open MPI's intermittent spawn hang, "
                   f"openpmix/openpmix#2735): aborting the application with exit code "
                   f"{EXIT_SPAWN_HUNG}; start it again, or raise MALLEABLE_SPAWN_TIMEOUT "
                   f"if spawns here are this slow")
        logger.error("%s", message)
        print(f"malleable: {message}", file=sys.stderr, flush=True)
        try:  # the main thread waits in Spawn: the source is not in use
            self.source.completed(Report(decision.offer.seq, self.size, iteration,
                                         error=f"spawn hung for {timeout:g} s"))
        except Exception as exc:  # the abort below must happen anyway
            logger.error("reporting the hung spawn failed: %s", exc)
        self.comm.Abort(EXIT_SPAWN_HUNG)

    def _hostfile(self, decision: Decision) -> str:
        """Rank 0 writes the new set's hostfile (read by mpirun, which runs beside rank 0)."""
        if not decision.offer.hosts:
            return ""
        path = os.path.join(tempfile.gettempdir(),
                            f"malleable-hosts-{os.getpid()}-{decision.offer.seq}")
        if self.rank == 0:
            with open(path, "w") as out:
                out.write(hostfile_text(decision.offer, decision.accepted))
        return path

    # ---------------------------------------------------------------- driving a loop

    def run(self, init: Callable[[Any], Data], step: Callable[[Any, Data, int], None],
            iterations: int, requests: Mapping[int, int] | None = None) -> Data | None:
        """Run ``step(comm, data, i)`` for i in [start, iterations) with a point before each.

        ``init(comm)`` builds the data on the first process set. ``requests`` maps an
        iteration to a total size the application asks for there, after the point and
        before the step (application-initiated, see :meth:`request`); each is asked
        once, by whichever process set runs that iteration. Returns the final data on
        the last process set, None on processes that left.
        """
        resumed = self.resume()
        iteration, data = resumed if resumed is not None else (0, init(self.comm))
        while iteration < iterations:
            kept = self.reconfigure(iteration, data)
            if kept is None:
                return None
            data = kept
            if requests and iteration in requests:
                self.request(requests[iteration], iteration)
            step(self.comm, data, iteration)
            iteration += 1
        self.finish(iteration)
        return data

    def request(self, target: int, iteration: int) -> int:
        """Ask for ``target`` processes in total (application-initiated); only rank 0 asks.

        The request is voluntary: the runner passes it to the manager, which may grant
        it later from free nodes through an ordinary offer at a reconfiguration point
        (a request below the current size is a voluntary shrink, carried out at once).
        Returns the request's number (0 on other ranks, or when the source takes no
        requests).
        """
        return self.source.request(target, iteration) if self.rank == 0 else 0

    def finish(self, iteration: int, **extra: Any) -> list[dict[str, Any]]:
        """Record the end (once); return the phases.

        Each phase has its ``size``, first ``iteration`` and ``end_iteration``, its
        ``time`` of start (epoch seconds), the ``reconfig_seconds`` the resize into it
        took (from the decision to the new processes holding the data; of which
        ``spawn_seconds`` to start them) and the ``seconds`` it computed (up to the
        next decision).
        """
        if not self.finished:
            self.finished = True
            self._record("finish", iteration, **extra)
        end = {"iteration": iteration, "time": time.time(), "reconfig_seconds": 0.0}
        phases = []
        for this, nxt in zip(self.phases, [*self.phases[1:], end], strict=True):
            seconds = nxt["time"] - this["time"] - nxt["reconfig_seconds"]
            phases.append({**this, "end_iteration": nxt["iteration"], "seconds": seconds})
        return phases
