"""The :class:`Policy` protocol and its decision types, re-exported by
:mod:`malleable.policies.base` (import them from there).

Apart from base.py because base.py is compiled in the compiled build (setup.py), and a
``runtime_checkable`` Protocol is not a class mypyc can compile (``isinstance(x, Policy)``
would fail): this module stays plain Python in both builds."""

from __future__ import annotations

from collections.abc import Generator, Iterable
from typing import Protocol, runtime_checkable

from malleable.model import Action, View

Steps = Generator[Action, int | None, None]
"""A decision being negotiated: ``send`` the answer to each action to get the next."""

#: What ``decide`` returns: a generator that receives answers, or any iterable.
Decision = Steps | Iterable[Action]


@runtime_checkable
class Policy(Protocol):
    """Anything with a ``name`` and a pure ``decide``."""

    @property
    def name(self) -> str:
        """A short name for logs and records."""
        ...

    def decide(self, view: View, now: float) -> Decision:
        """The actions to take now, given the view (see :mod:`malleable.policies.base`)."""
        ...
