"""What a managed job runs on an OAR site: the base job's work, and the extension jobs.

The base job runs the same sleep-based work as on Slurm (one unit of work progressing at
``1 / T(n)`` a second, ``T`` the job's application model from :mod:`malleable.apps`),
but learns its size ``n`` from OAR itself: its own nodes plus those of its running
extension jobs (``oarstat -J`` on the node, every ``tick`` seconds). An extension job
holds its node until it is deleted (a shrink) or its base job has ended.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass, field

from malleable.adapters.slurm.payload import Payload as SlurmPayload
from malleable.apps import AppCatalog, standard_catalog
from malleable.model import JobSpec

_TEMPLATE = '''#!/usr/bin/env python3
"""malleable payload for job {job_id} on OAR: sleeps through its work at the speed of its size."""
import json, os, subprocess, sys, time

TIMES = {{int(k): v for k, v in json.loads({times!r}).items()}}
TICK = {tick!r}
EXTENSIONS = {extensions!r}
JOB = int(os.environ.get("OAR_JOB_ID", "0"))


def size(last):
    try:
        out = subprocess.run(["oarstat", "-J"], capture_output=True, text=True,
                             timeout=20).stdout
        jobs = json.loads(out or "{{}}").values()
    except Exception as exc:
        print("size unknown:", exc, flush=True)
        return last
    n = 0
    for job in jobs:
        mine = job.get("Job_Id") == JOB or (job.get("name") or "").startswith(EXTENSIONS)
        if mine and job.get("state") == "Running":
            n += len(job.get("assigned_network_address") or [])
    return n or last


def seconds(n):
    sizes = sorted(TIMES)
    n = min(max(n, sizes[0]), sizes[-1])
    while n not in TIMES:
        n -= 1
    return max(TIMES[n], 1e-3)


n = size(min(TIMES))
done, last = 0.0, time.monotonic()
print("start", JOB, "nodes", n, "seconds", seconds(n), flush=True)
while done < 1.0:
    time.sleep(max(0.0, min(TICK, (1.0 - done) * seconds(n))))
    now = time.monotonic()
    done += (now - last) / seconds(n)
    last = now
    m = size(n)
    if m != n:
        print("resized", n, "->", m, "done", round(done, 4), flush=True)
        n = m
print("end", JOB, "nodes", n, flush=True)
sys.exit(0)
'''

#: An extension job: hold the node while the base job (``$1``) has not ended.
_EXTENSION = ("while oarstat -s -j {base} | grep -qE ': (Waiting|Hold|toLaunch|"
              "toAckReservation|Launching|Running|Suspended|Resuming)$'; do sleep 3; done")


@dataclass(frozen=True, slots=True)
class OarPayload:
    """Scaled like the Slurm payload; ``tick`` is longer (each look is a perl oarstat)."""

    time_scale: float = 1.0
    speed: float = 1.0
    tick: float = 2.0
    catalog: AppCatalog = field(default_factory=standard_catalog, repr=False, compare=False)

    def _slurm(self) -> SlurmPayload:
        return SlurmPayload(self.time_scale, self.speed, self.tick, self.catalog)

    def script(self, spec: JobSpec, extensions: str) -> str:
        """The base job's script; ``extensions`` is the name prefix of its extension jobs."""
        times = json.dumps({str(n): round(t, 6) for n, t in self._slurm().times(spec).items()})
        return _TEMPLATE.format(job_id=spec.id.replace('"', "'"), times=times, tick=self.tick,
                                extensions=extensions)

    def walltime(self, spec: JobSpec) -> str:
        """OAR's ``walltime=H:MM:SS``: as generous as the Slurm time limit."""
        minutes = self._slurm().time_limit_minutes(spec)
        return f"{minutes // 60}:{minutes % 60:02d}:00"

    @staticmethod
    def extension(base: int) -> str:
        """The command of an extension job of base job ``base``."""
        return _EXTENSION.format(base=shlex.quote(str(base)))
