"""The Slurm versions the testbed runs, each from the Debian suite that packages it.

| Slurm | Debian suite | base image |
|---|---|---|
| 22.05 (default) | bookworm (the host's) | ``debian:bookworm`` or ``malleable-base:bookworm`` |
| 24.11 | trixie | ``debian:trixie`` or ``malleable-base:trixie`` |
| 26.05 | sid | ``debian:sid`` or ``malleable-base:sid`` |

No backports carry Slurm, so a version is a suite. The bases of other suites than the
host's are built by ``testbed/base-image.sh`` from the host's apt sources with the suite
substituted. Images of versions other than the default carry no OAR (its packages and
PostgreSQL version are bookworm's): OAR sites need the default version.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from malleable.errors import InputError
from malleable.kinds import builder, label

if TYPE_CHECKING:
    from malleable.testbed.topology import Topology

#: The default Slurm version (Debian bookworm's, the host's).
DEFAULT = "22.05"
#: Slurm version (major.minor) -> the Debian suite that packages it.
SUITES: dict[str, str] = {"22.05": "bookworm", "24.11": "trixie", "26.05": "sid"}


def check(version: str) -> str:
    """A supported Slurm version, or an InputError naming the supported ones."""
    if version not in SUITES:
        raise InputError(f"unsupported Slurm version {version!r}: choose one of "
                         f"{', '.join(SUITES)}")
    return version


def suite(version: str) -> str:
    """The Debian suite of a Slurm version."""
    return SUITES[check(version)]


def local_base(version: str) -> str:
    """The tag of the locally built (mmdebstrap) base of a version."""
    return f"malleable-base:{suite(version)}"


def public_base(version: str) -> str:
    """The public Debian image of a version's suite (used when present)."""
    return f"debian:{suite(version)}"


def has_oar(version: str) -> bool:
    """Whether the image of this version carries OAR (only the default's does)."""
    return check(version) == DEFAULT


def check_topology(topology: Topology, version: str) -> None:
    """InputError for an unknown version, or OAR sites with a version whose image lacks OAR."""
    check(version)
    if check(version) == DEFAULT:  # its image carries every kind
        return
    by_kind: dict[str, list[str]] = {}
    for site in topology.sites:
        by_kind.setdefault(site.kind, []).append(site.name)
    for kind, names in by_kind.items():
        if builder(kind, "testbed", "the testbed").default_image_only:
            what = label(kind)
            raise InputError(f"{what} site(s) {', '.join(names)} need the default Slurm "
                             f"version {DEFAULT}: the Slurm {version} image carries no {what}")
