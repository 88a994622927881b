"""Factories for the built-in policies (the targets of the entry points).

KOALA's job-management approach (``pra``, ``pwa`` or ``none``) is an option of its
three malleability policies; ``--approach`` on the command line is its shorthand.
"""

from __future__ import annotations

from malleable.policies.fcfs import FCFS
from malleable.policies.koala import KoalaPolicy


def fpsma(approach: str = "pra") -> KoalaPolicy:
    """KOALA FPSMA: grow the oldest malleable jobs first, shrink the youngest (Fig. 4)."""
    return KoalaPolicy.named(approach, "fpsma")


def egs(approach: str = "pra") -> KoalaPolicy:
    """KOALA EGS: equal grow and shrink shares, bonus to the oldest, malus to the youngest."""
    return KoalaPolicy.named(approach, "egs")


def equipartition(approach: str = "pra") -> KoalaPolicy:
    """Equipartition: level the malleable jobs of a cluster to equal sizes."""
    return KoalaPolicy.named(approach, "equipartition")


def fcfs() -> FCFS:
    """Strict FCFS, first fit: the queue head starts as soon as it fits, nothing passes it."""
    return FCFS()
