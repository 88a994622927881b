"""The runs of ``experiment elastic``: one (policy, malleable fraction, seed) on a log slice.

A run reads its slice of the log (cached per process), converts it by
:mod:`malleable.experiments.elastic.workload`, simulates it on one cluster of the log
machine's nodes and keeps the four metrics of the 2026 study (Zojer, Posner and Ozden):
mean turnaround (submit to end), makespan (first submit to last end), mean wait and node
utilization (busy node-seconds over nodes times makespan).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from types import MappingProxyType
from typing import Any

from malleable.experiments.elastic.workload import convert
from malleable.model import Cluster
from malleable.policies.registry import make
from malleable.sim.run import SimConfig, simulate
from malleable.workloads.reallog import LogJob, read_log

DAY = 86400.0


@dataclass(frozen=True)
class PolicyRun:
    """A malleable policy as the study runs it: a label, a registered name, options."""

    key: str
    name: str
    options: Mapping[str, Any] = dataclasses.field(
        default_factory=lambda: MappingProxyType({}))
    what: str = ""


#: The baseline: EASY backfilling on the rigid log (fraction 0).
BASELINE = PolicyRun("easy-rigid", "easy", what="EASY backfilling on the rigid log")
#: The other baseline (``--baseline fcfs``): FCFS on the rigid log, as the reviewer's
#: Lublin case of issue 39 compared against.
FCFS_RIGID = PolicyRun("fcfs-rigid", "fcfs", what="FCFS on the rigid log")
BASELINES = {"easy": BASELINE, "fcfs": FCFS_RIGID}

#: The malleable policies, in the report's order.
POLICIES = (
    PolicyRun("easy-largest", "easy", MappingProxyType({"malleable_start": "largest"}),
              "EASY, malleable jobs started at the largest size that fits (EASY's default "
              "before issue 39), never resized"),
    PolicyRun("dmr", "dmr", what="DMRlib's Algorithm 2 (FCFS placement, expand on free "
              "nodes, shrink toward preferred for waiting jobs)"),
    PolicyRun("easy-dmr", "easy-dmr", what="EASY backfilling + DMRlib's Algorithm 2"),
    PolicyRun("fpsma-pra", "fpsma", MappingProxyType({"approach": "pra"}), "KOALA FPSMA, PRA"),
    PolicyRun("fpsma-pwa", "fpsma", MappingProxyType({"approach": "pwa"}), "KOALA FPSMA, PWA"),
    PolicyRun("egs-pra", "egs", MappingProxyType({"approach": "pra"}), "KOALA EGS, PRA"),
    PolicyRun("egs-pwa", "egs", MappingProxyType({"approach": "pwa"}), "KOALA EGS, PWA"),
    PolicyRun("equipartition", "equipartition", MappingProxyType({"approach": "pra"}),
              "equipartition of the malleable jobs (PRA placement)"),
    PolicyRun("acds", "acds", what="AC-DS (DEQ on the one site)"),
    # the options of issue 39 (step 3): EASY's start size, KOALA's growth cap (readings)
    PolicyRun("easy-preferred", "easy", MappingProxyType({"malleable_start": "preferred"}),
              "EASY, malleable jobs started at up to their preferred (logged) size (EASY's "
              "default since issue 39)"),
    PolicyRun("easy-minimum", "easy", MappingProxyType({"malleable_start": "minimum"}),
              "EASY, malleable jobs started at their minimum"),
    PolicyRun("fpsma-pra-cap2", "fpsma", MappingProxyType({"approach": "pra", "grow_cap": 2.0}),
              "KOALA FPSMA, PRA, growth capped at 2x the initial size (the logged size)"),
    PolicyRun("egs-pra-cap2", "egs", MappingProxyType({"approach": "pra", "grow_cap": 2.0}),
              "KOALA EGS, PRA, growth capped at 2x the initial size (the logged size)"),
)
BY_KEY = {p.key: p for p in (BASELINE, FCFS_RIGID, *POLICIES)}


@dataclass(frozen=True)
class Slice:
    """A slice of a log: ``days`` days from day ``start`` (of the log's first submit)."""

    path: str
    start: float
    days: float


@lru_cache(maxsize=4)
def slice_jobs(cut: Slice) -> tuple[tuple[LogJob, ...], int, str]:
    """The slice's jobs (submit times from the slice's first), the machine's nodes and the
    log's name."""
    log = read_log(Path(cut.path))
    begin, end = cut.start * DAY, (cut.start + cut.days) * DAY
    jobs = [j for j in log.jobs if begin <= j.submit < end]
    if not jobs:
        return (), log.nodes, log.name
    first = jobs[0].submit
    return (tuple(dataclasses.replace(j, submit=j.submit - first) for j in jobs), log.nodes,
            log.name)


def run_one(policy_key: str, fraction: float, seed: int, cut: Slice,
            options: Mapping[str, Any] | None = None, size_range: str = "logged"
            ) -> dict[str, Any]:
    """One simulation; its metrics (and the policy, fraction and seed)."""
    jobs, nodes, _ = slice_jobs(cut)
    policy = BY_KEY[policy_key]
    specs = convert(jobs, nodes, fraction, seed, size_range)
    built = make(policy.name, **{**policy.options, **(options or {})})
    result = simulate(specs, [Cluster("machine", nodes)], built, SimConfig(timeline=False))
    done = [r for r in result.records if r.end is not None and r.start is not None]
    ends = [r.end for r in done if r.end is not None]
    first = min(s.submit_time for s in specs)
    makespan = max(ends) - first if ends else 0.0
    area = result.busy_area
    return {
        "policy": policy_key, "fraction": fraction, "seed": seed, "jobs": len(specs),
        "completed": len(done),
        "turnaround": sum(r.response for r in done) / len(done) if done else 0.0,
        "wait": sum(r.wait for r in done) / len(done) if done else 0.0,
        "makespan": makespan,
        "utilization": area / (nodes * makespan) if makespan > 0 else 0.0,
        "node_seconds": area,
        "last_submit": max(s.submit_time for s in specs) - first,
        "malleable": sum(1 for s in specs if s.malleable),
        "grows": sum(1 for op in result.operations if op.kind == "grow"),
        "shrinks": sum(1 for op in result.operations if op.kind == "shrink"),
    }
