"""The batch script a managed job runs: sleep-based work that follows the job's size.

A job's work is one unit. At ``n`` nodes it progresses at ``1 / T(n)`` units a
second, where ``T`` is the job's application model (:mod:`malleable.apps`, the
very curve the simulator uses) times the time scale, divided by the site's speed.
The script reads its own node count with ``scontrol -o show job $SLURM_JOB_ID``
every ``tick`` seconds, so work done is kept across resizes and a grown job really
ends sooner (as in the simulator, up to one tick late). With a ``finish_file`` (a path on
the site's nodes, the site's ``finish_file`` key), the script ends as soon as it finds that
file, whatever work is left: for tests only. It is self-contained
(python3 and scontrol are all it needs on the node) and goes to sbatch on stdin.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from malleable.adapters import scaling, work
from malleable.apps import AppCatalog, standard_catalog
from malleable.model import JobSpec

_TEMPLATE = ('''#!/usr/bin/env python3
"""malleable payload for job {job_id}: sleeps through its work at the speed of its size."""
import json, os, re, subprocess, sys, time

TIMES = {{int(k): v for k, v in json.loads({times!r}).items()}}
TICK = {tick!r}
FINISH = {finish!r}
JOB = os.environ.get("SLURM_JOB_ID", "")


def size(last):
    try:
        out = subprocess.run(["scontrol", "-o", "show", "job", JOB], capture_output=True,
                             text=True, timeout=10).stdout
    except Exception as exc:
        print("size unknown:", exc, flush=True)
        return last
    found = re.search(r"\\bNumNodes=(\\d+)", out)
    return int(found.group(1)) if found else last


''' + work.SECONDS + '''

n = size(int(os.environ.get("SLURM_JOB_NUM_NODES") or min(TIMES)))
''' + work.LOOP)


@dataclass(frozen=True, slots=True)
class Payload:
    """How managed jobs' work is scaled: ``time_scale`` real seconds per model second.

    ``catalog`` models the jobs' applications (the standard catalog by default).
    ``finish_file``: once this file exists on the job's batch host, the job's remaining
    work counts as done at its next tick and the script ends normally (exit 0); ``None``:
    never (the default).
    """

    time_scale: float = 1.0
    speed: float = 1.0
    tick: float = 0.5
    catalog: AppCatalog = field(default_factory=standard_catalog, repr=False, compare=False)
    finish_file: str | None = None

    def __post_init__(self) -> None:
        scaling.check(self.time_scale, self.speed, self.tick, self.finish_file)

    def times(self, spec: JobSpec) -> dict[int, float]:
        """Real seconds the whole job takes at each size in [min, max]."""
        return scaling.times(self.catalog, spec, self.time_scale, self.speed)

    def script(self, spec: JobSpec) -> str:
        """The batch script for ``spec``."""
        times = json.dumps({str(n): round(t, 6) for n, t in self.times(spec).items()})
        return _TEMPLATE.format(job_id=work.docstring_id(spec.id), times=times, tick=self.tick,
                                finish=self.finish_file or "")

    def time_limit_minutes(self, spec: JobSpec) -> int:
        """A generous Slurm time limit: three times the run at the minimum size, >= 5 min."""
        return scaling.time_limit_minutes(self.times(spec))
