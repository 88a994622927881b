"""FILTER: which clusters a CooRM application wants views of (JSDL-like minimums). A
workload's applications carry one (:class:`~malleable.workloads.coorm.SimJob`); CooRM's
protocol sends it (:mod:`malleable.coorm.protocol` re-exports it)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


class Cluster(Protocol):
    """What a filter reads of a cluster (CooRM's CINFO, ``ClusterInfo``)."""

    @property
    def cid(self) -> str: ...

    @property
    def hosts(self) -> int: ...

    @property
    def speed(self) -> float: ...

    @property
    def cores_per_host(self) -> int: ...

    @property
    def ram_per_host_mb(self) -> int: ...


@dataclass(frozen=True, slots=True)
class Filter:
    """FILTER: which clusters a launcher wants views of (JSDL-like minimums)."""

    min_hosts: int = 1
    min_speed: float = 0.0
    min_cores_per_host: int = 1
    min_ram_per_host_mb: int = 0
    clusters: tuple[str, ...] | None = None
    """Explicit cluster ids to consider (None: every cluster)."""

    def accepts(self, info: Cluster) -> bool:
        return (info.hosts >= self.min_hosts and info.speed >= self.min_speed
                and info.cores_per_host >= self.min_cores_per_host
                and info.ram_per_host_mb >= self.min_ram_per_host_mb
                and (self.clusters is None or info.cid in self.clusters))
