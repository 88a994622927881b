"""Workloads W0-W3 of section IV-A, from a generated legacy-job model or an SWF trace.

The paper took packs of 200 consecutive jobs of the LLNL-Atlas-2006 trace, which
is not available offline here. :func:`legacy_jobs` generates comparable jobs
from a documented model (docs/coorm.md, "Legacy-job model"); :func:`swf_jobs`
takes them from a user-supplied SWF trace instead. Either way:

* W0: the pack; 20 % simple-moldable (Amdahl), 80 % rigid; one arrival per second.
* W1: W0 plus one CEM application inserted at a random place.
* W2: W0 with 50 % of the jobs replaced by CEM instances of the same area.
* W3: every job replaced by a CEM instance.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from malleable.errors import InputError
from malleable.workloads.coorm_apps import Amdahl, App, Cem, Rigid
from malleable.workloads.filters import Filter
from malleable.workloads.swf import read_swf

WORKLOADS = ("W0", "W1", "W2", "W3")
MOLDABLE_SHARE = 0.20
ARRIVAL_GAP = 1.0
#: The single CEM application of W1: a 128-host, 1.5-hour run on the first cluster.
W1_CEM_HOSTS, W1_CEM_RUNTIME = 128, 5400.0


@dataclass(frozen=True, slots=True)
class SimJob:
    """One application of a workload, as CooRM's simulations take it."""

    name: str
    submit: float
    app: App
    filter: Filter | None = None
    """Which clusters the launcher wants views of (None: every cluster)."""
    adaptation_delay: float = 0.0


@dataclass(frozen=True, slots=True)
class LegacyJob:
    """A job of the trace (or of the model): host count, run time, requested time."""

    hosts: int
    runtime: float
    walltime: float


@dataclass(frozen=True, slots=True)
class LegacyModel:
    """The generated stand-in for LLNL-Atlas (every parameter documented in docs/coorm.md)."""

    max_hosts: int = 128
    single_host: float = 0.15
    power_of_two: float = 0.75
    runtime_median: float = 1200.0
    runtime_sigma: float = 1.8
    runtime_min: float = 30.0
    runtime_max: float = 86_400.0
    accuracy_min: float = 0.1
    serial_max: float = 0.1

    def job(self, rng: random.Random) -> LegacyJob:
        runtime = min(self.runtime_max, max(self.runtime_min, rng.lognormvariate(
            math.log(self.runtime_median), self.runtime_sigma)))
        accuracy = rng.uniform(self.accuracy_min, 1.0)
        walltime = math.ceil(runtime / accuracy / 60.0) * 60.0
        return LegacyJob(self._hosts(rng), runtime, max(walltime, runtime))

    def _hosts(self, rng: random.Random) -> int:
        if rng.random() < self.single_host:
            return 1
        top = max(1, int(math.log2(self.max_hosts)))
        k = rng.randint(1, top)
        if rng.random() < self.power_of_two:
            return min(self.max_hosts, 1 << k)
        return min(self.max_hosts, rng.randint((1 << (k - 1)) + 1, 1 << k))


def legacy_jobs(count: int, seed: int, model: LegacyModel | None = None) -> list[LegacyJob]:
    """``count`` generated legacy jobs (one pack), reproducible from ``seed``."""
    rng = random.Random(seed)
    chosen = model or LegacyModel()
    return [chosen.job(rng) for _ in range(count)]


def swf_jobs(path: Path, count: int, pack: int, max_hosts: int,
             cores_per_host: int = 1) -> list[LegacyJob]:
    """Pack number ``pack`` (0-based) of ``count`` consecutive usable jobs of an SWF trace.

    Read with the core's SWF reader; jobs wider than ``max_hosts`` hosts (of
    ``cores_per_host`` processors) are skipped: the paper's rigid jobs run within
    one cluster. A job without a requested time requests its run time.
    """
    usable: list[LegacyJob] = []
    wanted = (pack + 1) * count
    for spec in read_swf(path).jobs:
        hosts = math.ceil(spec.initial_size / cores_per_host)
        runtime = spec.runtime or 0.0
        if runtime <= 0 or not 1 <= hosts <= max_hosts:
            continue
        usable.append(LegacyJob(hosts, runtime, max(spec.walltime or runtime, runtime)))
        if len(usable) >= wanted:
            return usable[pack * count:]
    raise InputError(f"the trace has {len(usable)} usable jobs (at most {max_hosts} hosts of "
                     f"{cores_per_host} processors, positive run time); pack {pack} of {count} "
                     f"jobs needs {wanted}: use fewer --jobs or --instances", source=str(path))


def workload(name: str, pack: Sequence[LegacyJob], seed: int,
             adaptation_delay: float = 0.0) -> list[SimJob]:
    """Workload ``name`` (W0-W3) built on ``pack``; ``adaptation_delay`` applies to CEMs."""
    if name not in WORKLOADS:
        raise InputError(f"unknown workload {name!r}; choose one of {', '.join(WORKLOADS)}")
    rng = random.Random(seed)
    apps: list[App] = [_legacy_app(job, rng) for job in pack]
    if name == "W1":
        apps.insert(rng.randrange(len(apps) + 1), Cem.like(W1_CEM_HOSTS, W1_CEM_RUNTIME))
    elif name in ("W2", "W3"):
        share = 0.5 if name == "W2" else 1.0
        replaced = set(rng.sample(range(len(pack)), round(share * len(pack))))
        apps = [Cem.like(pack[i].hosts, pack[i].runtime) if i in replaced else apps[i]
                for i in range(len(pack))]
    return list(_arrivals(apps, adaptation_delay))


def _legacy_app(job: LegacyJob, rng: random.Random) -> App:
    moldable = rng.random() < MOLDABLE_SHARE
    serial = rng.uniform(0.0, LegacyModel().serial_max)
    if moldable:
        return Amdahl(job.hosts, job.runtime, job.walltime, serial)
    return Rigid(job.hosts, job.runtime, job.walltime)


def _arrivals(apps: Iterable[App], delay: float) -> Iterable[SimJob]:
    for i, app in enumerate(apps):
        yield SimJob(f"{app.kind}-{i:04d}", i * ARRIVAL_GAP, app,
                     adaptation_delay=delay if isinstance(app, Cem) else 0.0)
