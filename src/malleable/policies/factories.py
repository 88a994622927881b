"""Factories for the built-in policies (the targets of the entry points)."""

from __future__ import annotations

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
