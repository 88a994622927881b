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

So FPSMA's "send grow request, get accepted number" is ``accepted = yield Grow(j, v)``.
A policy that needs no answers may return a plain list.
"""

from __future__ import annotations

from collections.abc import Generator, Iterable, Iterator
from typing import Protocol, runtime_checkable

from malleable.model import Action, View

#: What ``decide`` returns: a generator that receives answers, or any iterable.
Decision = Generator[Action, int | None, None] | Iterable[Action]


@runtime_checkable
class Policy(Protocol):
    """Anything with a ``name`` and a pure ``decide``."""

    @property
    def name(self) -> str:
        """A short name for logs and records."""
        ...

    def decide(self, view: View, now: float) -> Decision:
        """The actions to take now, given the view (see the module docstring)."""
        ...


Steps = Generator[Action, int | None, None]
"""A decision being negotiated: ``send`` the answer to each action to get the next."""


def negotiate(decision: Decision) -> Steps:
    """Any decision as a generator that takes answers (a plain iterable ignores them)."""
    return decision if isinstance(decision, Generator) else _ignoring(iter(decision))


def _ignoring(actions: Iterator[Action]) -> Steps:
    yield from actions


def next_action(steps: Steps, answer: int | None) -> Action | None:
    """Send ``answer`` (None first) and get the next action, or None when the decision is done."""
    try:
        return steps.send(answer)
    except StopIteration:
        return None
