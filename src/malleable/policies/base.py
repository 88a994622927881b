"""The policy interface.

A policy is pure: ``decide(view, now)`` reads an immutable :class:`~malleable.model.View`
and yields actions. It never calls an adapter and never reads the wall clock, so the
same object runs in the simulator and against real clusters.

The negotiation of KOALA (section V-C) is explicit: when ``decide`` is a generator,
the manager sends back the answer to each action it yields:

* :class:`~malleable.model.Grow`   -> the number of nodes the job accepted (0..offer);
* :class:`~malleable.model.Shrink` -> the number of nodes the job will release;
* :class:`~malleable.model.Place`  -> the size the job started with (0 if refused);
* anything else                   -> ``None``.

So FPSMA's "send grow request, get accepted number" is
``accepted = answered((yield Grow(j, v)))``. A policy that needs no answers may return a
plain list. A part of a decision that ends with a value (nodes granted, a job left
waiting...) is a ``Negotiating[R]``; the whole decision is ``Steps`` (it ends with
nothing); :func:`relay` passes another decision's actions on and notes each answer.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterator
from types import GeneratorType
from typing import TypeVar, cast

from malleable.model import Action, Reject, View
from malleable.policies.protocol import Decision as Decision
from malleable.policies.protocol import Policy as Policy
from malleable.policies.protocol import Steps as Steps

_R = TypeVar("_R")
_A = TypeVar("_A", bound=Action)

Negotiating = Generator[Action, int | None, _R]
"""Part of a decision being negotiated that ends with a value: ``Negotiating[bool]``..."""


#: The generator types met so far: Python's, and a compiled policy's (setup.py), one type
#: per generator function, learnt at its first decision.
_GENERATORS: set[type] = {GeneratorType}


def negotiate(decision: Decision) -> Steps:
    """Any decision as a generator that takes answers (a plain iterable ignores them)."""
    if type(decision) in _GENERATORS:  # the common case, without the ABC's isinstance
        return cast(Steps, decision)
    if isinstance(decision, Generator):
        _GENERATORS.add(type(decision))
        return decision
    return _ignoring(iter(decision))


def _ignoring(actions: Iterator[Action]) -> Steps:
    # Not ``yield from``: it would pass each answer to ``actions.send``, which a plain
    # iterator does not have (AttributeError on the first non-None answer).
    for action in actions:  # noqa: UP028 (see above)
        yield action


def next_action(steps: Steps, answer: int | None) -> Action | None:
    """Send ``answer`` (None first) and get the next action, or None when the decision is done."""
    try:
        return steps.send(answer)
    except StopIteration:
        return None


def answered(answer: int | None) -> int:
    """The nodes an answer counts (accepted, released or granted; 0 for ``None``)."""
    return int(answer or 0)


def relay(steps: Generator[_A, int | None, _R],
          note: Callable[[_A, int], None]) -> Generator[_A, int | None, _R]:
    """Yield ``steps``' actions, send each answer back, ``note(action, answered(answer))``;
    return what ``steps`` returns."""
    answer: int | None = None
    while True:
        try:
            action = steps.send(answer)
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
        answer = yield action
        note(action, answered(answer))


# ------------------------------------------------------------------ feasibility
#
# A job that needs more nodes than any one cluster can ever give it (its nodes outside
# its reserve) is rejected ("never", as opposed to "not now"), so it does not wait for
# ever. The test and the record are decided here, once; each policy asks at the point
# of its queue scan where it always has (so jobs are rejected at the same cycle and in
# the same order as before) and with the size it would start the job at:
#
# * KOALA, DMR and ACDS: the job's minimum size, whenever their scan reaches the job
#   (ACDS: only at a quantum boundary);
# * EASY (and EASY-DMR): the initial size of a malleable job, the minimum of any other,
#   when the scan reaches it (not once nothing can start and the head holds a reservation);
# * FCFS: the initial size, when the job is at the head and does not fit now.


def largest_offer(view: View) -> int:
    """The most nodes one cluster can ever give a job: its nodes outside its reserve."""
    largest = 0
    for cluster in view.clusters.values():  # a loop, not max(genexpr): FCFS's hot path
        offer = cluster.nodes - cluster.reserve
        if offer > largest:
            largest = offer
    return largest


def infeasible(job_id: str, needs: int, largest: int) -> Reject | None:
    """The Reject for a job that needs more than ``largest`` nodes, else None."""
    if needs <= largest:
        return None
    return Reject(job_id, f"needs {needs} nodes, the largest cluster offers {largest}")
