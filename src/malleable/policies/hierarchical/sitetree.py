"""Build the scheduler tree of real sites from a :class:`~malleable.model.View`.

The root is the grid, its children the sites (one per cluster that has jobs taking
part), then one level per grouping of the configuration (``JobSpec.group``,
``JobSpec.user``), then the jobs. Nodes are named by their path from the root, e.g.
``("das3-vu", "astro")``, so a node keeps its allocation from one reallocation to
the next even though the tree is rebuilt from each view.

Only the manager's running malleable jobs and the waiting jobs the policy means to
start take part; everything else on a cluster (rigid jobs, local users' jobs, the
reserve) is subtracted from the site's capacity, which caps the site node.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from malleable.model import ClusterView, JobSpec, View
from malleable.policies.hierarchical.tree import TreeLayout

Path = tuple[str, ...]


@dataclass(frozen=True)
class Member:
    """A job taking part in the allocation: running (``size`` > 0) or about to start."""

    spec: JobSpec
    cluster: str
    size: int
    desire: float
    start: float = float("inf")


@dataclass(frozen=True)
class SiteTree:
    """The layout, each node's path per level, and each member's leaf."""

    layout: TreeLayout
    paths: dict[int, list[Path]]
    leaf: NDArray[np.int64]


def capacity(cluster: ClusterView) -> int:
    """Nodes the tree may hand out on ``cluster``: all but the reserve and fixed jobs."""
    fixed = sum(j.size for j in cluster.running.values()
                if not (j.managed and j.spec.malleable))
    return max(0, cluster.nodes - cluster.reserve - fixed)


def path_of(member: Member, levels: Sequence[str]) -> Path:
    """The member's leaf path: its site, then its value of each grouping."""
    keys = {"site": member.cluster, "group": member.spec.group, "user": member.spec.user}
    return tuple(keys[level] for level in levels)


def build(members: Sequence[Member], levels: Sequence[str]) -> SiteTree:
    """The tree over ``members`` (at least one)."""
    depth = len(levels) + 2  # K: jobs, the levels, the root
    leaves = [path_of(m, levels) for m in members]
    paths: dict[int, list[Path]] = {}
    for level in range(2, depth + 1):
        keep = depth - level  # path length of the nodes at this level
        paths[level] = sorted({p[:keep] for p in leaves})
    index = {level: {p: i for i, p in enumerate(paths[level])} for level in paths}
    parents = tuple(np.array([index[level + 1][p[:-1]] for p in paths[level]], dtype=np.int64)
                    for level in range(2, depth))
    layout = TreeLayout(tuple(len(paths[level]) for level in range(2, depth + 1)), parents)
    leaf = np.array([index[2][p] for p in leaves], dtype=np.int64)
    return SiteTree(layout, paths, leaf)


def site_of(view: View) -> dict[str, ClusterView]:
    """The clusters by name, in a stable order."""
    return {name: view.clusters[name] for name in sorted(view.clusters)}
