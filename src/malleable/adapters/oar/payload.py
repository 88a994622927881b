"""What a managed job runs on an OAR site: the base job's work, and the extension jobs.

The base job runs the same sleep-based work as every kind's payload (one unit of work progressing at
``1 / T(n)`` a second, ``T`` the job's application model from :mod:`malleable.apps`),
but learns its size ``n`` from a file next to its script in the shared home
(``SCRIPT.size``), which the adapter writes whenever it sees the job's size change in
OAR (the base job's nodes plus its running extension jobs); until then the base job's
own node count (``$OAR_NODEFILE``). It reads the file every ``tick`` seconds: a file
read, not a perl ``oarstat`` per job and tick, which the testbed's shared cores could
not afford. An extension job holds its node until it is deleted (a shrink) or its base
job has ended.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass, field

from malleable.adapters import scaling, work
from malleable.apps import AppCatalog, standard_catalog
from malleable.model import JobSpec

_TEMPLATE = ('''#!/usr/bin/env python3
"""malleable payload for job {job_id} on OAR: sleeps through its work at the speed of its size."""
import json, os, sys, time

TIMES = {{int(k): v for k, v in json.loads({times!r}).items()}}
TICK = {tick!r}
FINISH = {finish!r}
SIZE_FILE = os.path.splitext(os.path.abspath(__file__))[0] + ".size"
JOB = os.environ.get("OAR_JOB_ID", "")


def own_nodes():
    try:
        with open(os.environ["OAR_NODEFILE"]) as f:
            return len({{line.strip() for line in f if line.strip()}})
    except (KeyError, OSError):
        return min(TIMES)


def size(last):
    try:
        with open(SIZE_FILE) as f:
            return int(f.read().strip() or last)
    except (OSError, ValueError):
        return last


''' + work.SECONDS + '''

n = size(own_nodes())
''' + work.LOOP)

#: An extension job: hold the node while the base job (``$1``) has not ended.
_EXTENSION = ("while oarstat -s -j {base} | grep -qE ': (Waiting|Hold|toLaunch|"
              "toAckReservation|Launching|Running|Suspended|Resuming)$'; do sleep 15; done")


def hms(seconds: int) -> str:
    """OAR's ``H:MM:SS`` for a wall time of whole seconds (hours unbounded)."""
    return f"{seconds // 3600}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"


@dataclass(frozen=True, slots=True)
class OarPayload:
    """Scaled as every kind's payload is (:mod:`malleable.adapters.scaling`: the same run
    times and time limit), and ended by ``finish_file`` the same way (:mod:`~.work`)."""

    time_scale: float = 1.0
    speed: float = 1.0
    tick: float = 0.5
    catalog: AppCatalog = field(default_factory=standard_catalog, repr=False, compare=False)
    finish_file: str | None = None

    def _times(self, spec: JobSpec) -> dict[int, float]:
        """The job's run time at each size (ValueError for a bad knob, checked here)."""
        scaling.check(self.time_scale, self.speed, self.tick, self.finish_file)
        return scaling.times(self.catalog, spec, self.time_scale, self.speed)

    def script(self, spec: JobSpec) -> str:
        """The base job's script (it reads its size from ``SCRIPT.size``)."""
        times = json.dumps({str(n): round(t, 6) for n, t in self._times(spec).items()})
        return _TEMPLATE.format(job_id=work.docstring_id(spec.id), times=times, tick=self.tick,
                                finish=self.finish_file or "")

    def walltime(self, spec: JobSpec) -> str:
        """OAR's ``walltime=H:MM:SS``: the generous limit of
        :func:`~malleable.adapters.scaling.time_limit_minutes`."""
        return hms(scaling.time_limit_minutes(self._times(spec)) * 60)

    @staticmethod
    def extension(base: int) -> str:
        """The command of an extension job of base job ``base``."""
        return _EXTENSION.format(base=shlex.quote(str(base)))
