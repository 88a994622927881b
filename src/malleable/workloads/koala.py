"""The KOALA paper's workloads (section VI-C).

300 jobs, a uniform mix of FT and GADGET-2; malleable jobs have minimum 2,
maximum 46 (GADGET-2) or 32 (FT) and initial size 2; rigid jobs (half of them, at
random, in the ``mr`` workloads) have size 2. Jobs arrive every 120 s (Wm, Wmr) or
every 30 s (W'm, W'mr), all submitted from one client. The seed draws the mix.
"""

from __future__ import annotations

import random

from malleable.model import JobKind, JobSpec, SizeRule

#: name -> (inter-arrival in s, fraction of rigid jobs)
KOALA_WORKLOADS: dict[str, tuple[float, float]] = {
    "wm": (120.0, 0.0),
    "wmr": (120.0, 0.5),
    "wm-prime": (30.0, 0.0),
    "wmr-prime": (30.0, 0.5),
}

MAX_SIZE = {"gadget2": 46, "ft": 32}


def koala_workload(name: str, seed: int, jobs: int = 300) -> list[JobSpec]:
    """Generate one of :data:`KOALA_WORKLOADS`; ValueError for an unknown name."""
    if name not in KOALA_WORKLOADS:
        raise ValueError(f"unknown workload {name!r}; valid: {', '.join(KOALA_WORKLOADS)}")
    interarrival, rigid_fraction = KOALA_WORKLOADS[name]
    rng = random.Random(seed)
    specs = []
    for i in range(jobs):
        app = rng.choice(("ft", "gadget2"))
        rule = SizeRule.POW2 if app == "ft" else SizeRule.ANY
        rigid = rng.random() < rigid_fraction
        kind = JobKind.RIGID if rigid else JobKind.MALLEABLE
        high = 2 if rigid else MAX_SIZE[app]
        specs.append(JobSpec(f"{name}-{i + 1}", kind, 2, high, 2, submit_time=i * interarrival,
                             app=app, size_rule=rule))
    return specs
