"""The simulation runs behind ``malleable experiment coorm`` and their key numbers.

A :class:`RunSpec` names one simulation (system, workload, cluster count,
instance, CEM adaptation delay); :func:`run_one` builds its platform and workload
and runs it, in whichever process it is sent to, returning a :class:`RunOutcome`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from statistics import median
from typing import Any

from malleable.coorm.core import CoreConfig
from malleable.coorm.oar import simulate_oar
from malleable.coorm.resources import Platform, paper_platform
from malleable.coorm.sim import SimResult, simulate_coorm
from malleable.workloads.coorm import LegacyJob, SimJob, legacy_jobs, swf_jobs, workload


@dataclass(frozen=True, slots=True)
class Setup:
    """Parameters shared by every run of one experiment."""

    hosts: int = 128
    jobs: int = 200
    seed: int = 1
    repolicy_interval: float = 1.0
    fair_start: float = 5.0
    swf: str | None = None
    swf_cores_per_host: int = 1


@dataclass(frozen=True, slots=True)
class RunSpec:
    system: str  # "coorm" | "oar"
    workload: str  # W0..W3
    clusters: int
    instance: int
    delay: float = 0.0
    count_json: bool = False


@dataclass(frozen=True, slots=True)
class RunOutcome:
    spec: RunSpec
    computed: int
    evaluated: int
    cpu_time: float
    messages: int
    cdr_bytes: int
    json_bytes: int
    policy_runs: int
    apps: int
    mean_response: float
    makespan: float
    cem_end: float
    """End time of the first CEM application (Fig. 7), nan when there is none."""
    cdr_by_type: dict[str, int] = field(default_factory=dict)
    """CDR-like bytes per message type."""
    cap_steps: int = 0
    """CAP steps sent in changeNotify messages."""
    change_notifies: int = 0
    """changeNotify messages sent."""


def pack_for(setup: Setup, instance: int) -> list[LegacyJob]:
    if setup.swf is not None:
        return swf_jobs(Path(setup.swf), setup.jobs, instance, setup.hosts,
                        setup.swf_cores_per_host)
    return legacy_jobs(setup.jobs, setup.seed * 1000 + instance)


def run_one(setup: Setup, spec: RunSpec) -> RunOutcome:
    """Run one simulation (called in a worker process)."""
    platform = paper_platform(spec.clusters, setup.hosts)
    jobs = workload(spec.workload, pack_for(setup, spec.instance), setup.seed * 1000
                    + spec.instance, adaptation_delay=spec.delay)
    system = SYSTEMS.get(spec.system)
    if system is None:
        raise ValueError(f"unknown system {spec.system!r}; valid: {', '.join(SYSTEMS)}")
    return _outcome(spec, system(setup, platform, jobs, spec.count_json))


def _coorm(setup: Setup, platform: Platform, jobs: list[SimJob], count_json: bool
           ) -> SimResult:
    config = CoreConfig(setup.repolicy_interval, setup.fair_start)
    return simulate_coorm(platform, jobs, config, count_json=count_json)


def _oar(setup: Setup, platform: Platform, jobs: list[SimJob], count_json: bool
         ) -> SimResult:
    return simulate_oar(platform, jobs, setup.repolicy_interval, count_json=count_json)


#: The simulated systems a :class:`RunSpec` names (the paper compares CooRM with OAR).
SYSTEMS: dict[str, Callable[[Setup, Platform, list[SimJob], bool], SimResult]] = {
    "coorm": _coorm, "oar": _oar}


def _outcome(spec: RunSpec, result: SimResult) -> RunOutcome:
    finished = [j for j in result.jobs if math.isfinite(j.end)]
    response = [j.end - j.submit for j in finished]
    cems = [j for j in result.jobs if j.kind == "cem"]
    return RunOutcome(
        spec, result.computed, result.evaluated, result.cpu_time, result.traffic.messages,
        result.traffic.cdr_bytes, result.traffic.json_bytes, result.policy_runs,
        len(result.jobs), sum(response) / len(response) if response else math.nan,
        result.makespan, cems[0].end if cems else math.nan, dict(result.traffic.by_type),
        result.traffic.cap_steps, result.traffic.sent_by_type.get("changeNotify", 0))


def outcome_dict(o: RunOutcome) -> dict[str, Any]:
    return asdict(o)


def quartiles(values: list[float]) -> dict[str, float]:
    """min, quartiles and max (the paper's Fig. 6 whiskers)."""
    ordered = sorted(values)
    if not ordered:
        return {}

    def q(p: float) -> float:
        pos = p * (len(ordered) - 1)
        low, high = math.floor(pos), math.ceil(pos)
        return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)

    return {"min": ordered[0], "q1": q(0.25), "median": median(ordered), "q3": q(0.75),
            "max": ordered[-1]}
