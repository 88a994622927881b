"""Find policies by name: built-ins and plug-ins of the ``malleable.policies`` group.

An entry point names a factory: ``factory(**options) -> Policy``. A plug-in that
fails to load is logged and skipped; an unknown name fails with the valid ones.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable
from importlib.metadata import entry_points
from typing import Any

from malleable.policies.base import Policy

logger = logging.getLogger(__name__)

GROUP = "malleable.policies"

#: Built-in policies (also declared as entry points in pyproject.toml).
BUILTIN: dict[str, str] = {
    "fpsma": "malleable.policies.factories:fpsma",
    "egs": "malleable.policies.factories:egs",
    "equipartition": "malleable.policies.factories:equipartition",
    "dmr": "malleable.policies.dmr:dmr",
    "easy": "malleable.policies.easy:easy",
    "easy-dmr": "malleable.policies.dmr_study:easy_dmr",
    "fcfs": "malleable.policies.fcfs:FCFS",
    "acds": "malleable.policies.hierarchical.factories:acds",
}

Factory = Callable[..., Policy]


def _load(target: str) -> Factory:
    module, _, attr = target.partition(":")
    factory: Factory = getattr(importlib.import_module(module), attr)
    return factory


def available() -> dict[str, Factory]:
    """Every policy that loads, by name (built-ins first)."""
    found: dict[str, Factory] = {}
    targets = dict(BUILTIN)
    for ep in entry_points(group=GROUP):
        targets.setdefault(ep.name, ep.value)
    for name, target in targets.items():
        try:
            found[name] = _load(target)
        except Exception as exc:  # a broken plug-in must not break the others
            logger.warning("policy plug-in %s (%s) failed to load: %s", name, target, exc)
    return found


def make(name: str, **options: Any) -> Policy:
    """Build the policy ``name``; ValueError listing the valid names when unknown."""
    policies = available()
    if name not in policies:
        raise ValueError(f"unknown policy {name!r}; valid: {', '.join(sorted(policies))}")
    return policies[name](**options)


def describe(factory: Factory) -> str:
    """The first line of a factory's docstring."""
    doc = (factory.__doc__ or "").strip()
    return doc.splitlines()[0] if doc else ""
