"""Factory of the real-site hierarchical policy (the target of its entry point)."""

from __future__ import annotations

from typing import Any

from malleable.policies.hierarchical.policy import HierarchicalPolicy


def acds(**options: Any) -> HierarchicalPolicy:
    """AC-DS: DEQ down grid -> site -> group from the jobs' feedback (EQUI-EQUI without)."""
    return HierarchicalPolicy.from_options(options)
