"""The paper's resource model (section IV-A): nC clusters of nH hosts and a WAN.

Cluster ``i`` (1-based) is ``1 + 0.1 (i - 1)`` times faster than the first. The
clusters are joined by a hierarchical WAN, the latencies typical of the Internet:
clusters are paired into sites' metropolitan areas, pairs into regions, regions
into a continent (see :func:`wan_latency`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from malleable.coorm.protocol import ClusterInfo, Link

#: Hierarchy levels of the WAN model: (group size, one-way latency in seconds).
#: Two clusters in the same group of 2 are 1 ms apart (a metropolitan network),
#: of 4: 10 ms (a national network), of 8: 30 ms (a continent), beyond: 100 ms.
WAN_LEVELS: tuple[tuple[int, float], ...] = ((2, 0.001), (4, 0.010), (8, 0.030))
WAN_FAR = 0.100
WAN_BANDWIDTH = 1.25e8  # bytes/s (1 Gbit/s)


def wan_latency(i: int, j: int) -> float:
    """Latency between clusters ``i`` and ``j`` (0-based indices) in the hierarchical model."""
    if i == j:
        return 0.0
    for group, latency in WAN_LEVELS:
        if i // group == j // group:
            return latency
    return WAN_FAR


@dataclass(frozen=True, slots=True)
class Platform:
    """Clusters (CINFOs) and the network between them (ICINFO)."""

    clusters: tuple[ClusterInfo, ...]
    links: tuple[Link, ...] = ()
    _latency: Mapping[tuple[str, str], float] = field(default_factory=dict, repr=False,
                                                      compare=False)
    _by_id: Mapping[str, ClusterInfo] = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        ids = [c.cid for c in self.clusters]
        if len(set(ids)) != len(ids):
            raise ValueError(f"cluster ids must be unique: {ids}")
        table = {}
        for lk in self.links:
            table[(lk.a, lk.b)] = lk.latency
            table[(lk.b, lk.a)] = lk.latency
        object.__setattr__(self, "_latency", table)
        object.__setattr__(self, "_by_id", {c.cid: c for c in self.clusters})

    @property
    def ids(self) -> tuple[str, ...]:
        return tuple(c.cid for c in self.clusters)

    def info(self, cid: str) -> ClusterInfo:
        return self._by_id[cid]

    @property
    def bandwidth(self) -> float:
        """The slowest inter-cluster link (bytes/s)."""
        return min((lk.bandwidth for lk in self.links), default=WAN_BANDWIDTH)

    def latency(self, a: str, b: str) -> float:
        if a == b:
            return 0.0
        return self._latency.get((a, b), WAN_FAR)


def paper_platform(n_clusters: int, hosts: int = 128) -> Platform:
    """The resource model of section IV-A: ``n_clusters`` clusters of ``hosts`` hosts."""
    if n_clusters < 1 or hosts < 1:
        raise ValueError(f"need at least one cluster and one host, not {n_clusters}x{hosts}")
    clusters = tuple(ClusterInfo(cid=f"c{i + 1}", hosts=hosts, speed=round(1 + 0.1 * i, 6))
                     for i in range(n_clusters))
    return Platform(clusters, links=hierarchical_links(clusters))


def hierarchical_links(clusters: Sequence[ClusterInfo]) -> tuple[Link, ...]:
    return tuple(Link(a.cid, b.cid, wan_latency(i, j), WAN_BANDWIDTH)
                 for i, a in enumerate(clusters) for j, b in enumerate(clusters) if i < j)
