"""Factories for the built-in policies (the targets of the entry points).

KOALA's job-management approach (``pra``, ``pwa`` or ``none``) is an option of its
three malleability policies; ``--approach`` on the command line is its shorthand.
``grow_threshold`` (a fraction of the platform's nodes, 1.0: none) is KOALA's growth-only
threshold, ``grow_cap`` (0: none) the cap on a job's growth relative to its initial size (a
reading; see :mod:`malleable.policies.koala`).
"""

from __future__ import annotations

from malleable.policies.fcfs import FCFS
from malleable.policies.koala import KoalaPolicy


def fpsma(approach: str = "pra", grow_threshold: float = 1.0,
          grow_cap: float = 0.0) -> KoalaPolicy:
    """KOALA FPSMA: grow the oldest malleable jobs first, shrink the youngest (Fig. 4)."""
    return KoalaPolicy.named(approach, "fpsma", grow_threshold, grow_cap)


def egs(approach: str = "pra", grow_threshold: float = 1.0,
        grow_cap: float = 0.0) -> KoalaPolicy:
    """KOALA EGS: equal grow and shrink shares, bonus to the oldest, malus to the youngest."""
    return KoalaPolicy.named(approach, "egs", grow_threshold, grow_cap)


def equipartition(approach: str = "pra", grow_threshold: float = 1.0,
                  grow_cap: float = 0.0) -> KoalaPolicy:
    """Equipartition: level the malleable jobs of a cluster to equal sizes."""
    return KoalaPolicy.named(approach, "equipartition", grow_threshold, grow_cap)


def fcfs() -> FCFS:
    """Strict FCFS, first fit: the queue head starts as soon as it fits, nothing passes it."""
    return FCFS()
