"""The real-site policy's configuration: the tree, the quanta, the rule.

Given as a mapping (a TOML table, or keyword options of the policy factory)::

    levels = ["site", "group"]   # grid -> site (cluster) -> group (JobSpec.group) -> jobs
    quantum = 60.0               # seconds: the level-2 quantum L
    quantum_factor = 1           # level k has quantum QF^(k-2) * L ...
    quanta = [1, 2, 4]           # ... or give the multiples of L per level explicitly
    rule = "deq"                 # or "equi" (EQUI-EQUI)
    greedy_utilization = 0.8     # A-Greedy's delta, for jobs reporting utilization
    greedy_responsiveness = 2.0  # A-Greedy's rho

The root is always the grid (all clusters), and the first level under it is always
the site, because a running job's processors come from its own cluster: the site
node is capped at what its cluster can give. Further levels group the jobs by
``JobSpec.group`` or ``JobSpec.user``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from malleable.errors import InputError
from malleable.policies.hierarchical.estimators import AGreedyParams
from malleable.policies.hierarchical.scheduler import Rule
from malleable.policies.hierarchical.tree import QuantumPattern

#: Levels a tree may use below the site, and the job field each groups by.
GROUPINGS = ("group", "user")

KEYS = ("levels", "quantum", "quantum_factor", "quanta", "rule", "greedy_utilization",
        "greedy_responsiveness")


@dataclass(frozen=True)
class TreeConfig:
    """A validated configuration (see the module docstring)."""

    levels: tuple[str, ...] = ("site", "group")
    quantum: float = 60.0
    quanta: QuantumPattern = field(default_factory=lambda: QuantumPattern((1, 1, 1)))
    rule: Rule = Rule.DEQ
    greedy: AGreedyParams = field(default_factory=AGreedyParams)

    @property
    def depth(self) -> int:
        """K: the levels of the tree, jobs and the grid root included."""
        return len(self.levels) + 2

    @classmethod
    def from_mapping(cls, options: Mapping[str, Any], source: str = "policy options"
                     ) -> TreeConfig:
        """Validate ``options``; InputError naming the bad key and what would do."""
        unknown = sorted(set(options) - set(KEYS))
        if unknown:
            raise InputError(f"unknown option(s) {', '.join(unknown)}; valid: {', '.join(KEYS)}",
                             source=source)
        levels = _levels(options.get("levels", ["site", "group"]), source)
        quantum = _positive(options.get("quantum", 60.0), "quantum", source)
        quanta = _quanta(options, len(levels) + 2, source)
        rule = _rule(options.get("rule", "deq"), source)
        try:
            greedy = AGreedyParams(float(options.get("greedy_utilization", 0.8)),
                                   float(options.get("greedy_responsiveness", 2.0)))
        except (TypeError, ValueError) as exc:
            raise InputError(str(exc), source=source) from None
        return cls(levels, quantum, quanta, rule, greedy)


def _levels(value: Any, source: str) -> tuple[str, ...]:
    if isinstance(value, str) or not all(isinstance(v, str) for v in value):
        raise InputError("levels must be a list of names, e.g. [\"site\", \"group\"]",
                         source=source)
    levels = tuple(value)
    if not levels or levels[0] != "site":
        raise InputError("levels must start with \"site\" (a job's processors come from its "
                         "cluster)", source=source)
    bad = [v for v in levels[1:] if v not in GROUPINGS]
    if bad or len(set(levels)) != len(levels):
        raise InputError(f"levels below \"site\" must be distinct names among "
                         f"{', '.join(GROUPINGS)}; got {list(levels)}", source=source)
    return levels


def _positive(value: Any, name: str, source: str) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = math.nan
    if not number > 0 or not math.isfinite(number):
        raise InputError(f"{name} must be a positive number of seconds, not {value!r}",
                         source=source)
    return number


def _quanta(options: Mapping[str, Any], depth: int, source: str) -> QuantumPattern:
    if "quanta" in options and "quantum_factor" in options:
        raise InputError("give quanta or quantum_factor, not both", source=source)
    try:
        if "quanta" in options:
            multiples = tuple(int(m) for m in options["quanta"])
            if len(multiples) != depth - 1:
                raise ValueError(f"quanta needs {depth - 1} multiples (levels 2..{depth}), "
                                 f"not {len(multiples)}")
            return QuantumPattern(multiples)
        return QuantumPattern.geometric(depth, int(options.get("quantum_factor", 1)))
    except (TypeError, ValueError) as exc:
        raise InputError(str(exc), source=source) from None


def _rule(value: Any, source: str) -> Rule:
    try:
        return Rule(value)
    except ValueError:
        valid = ", ".join(r.value for r in Rule)
        raise InputError(f"rule {value!r} is not one of {valid}", source=source) from None
