"""The testbed's users and their Slurm accounting, set up at bring-up.

Every container has the service account ``malleable`` (uid 2000) and the ordinary users
``alice``, ``bob`` and ``carol`` (uids 2001-2003), with homes on the site's shared ``/home``
(see testbed/Dockerfile and testbed-entrypoint). Once every controller has registered its
cluster with the shared slurmdbd, :func:`setup` gives each user an association (account
``users`` on every Slurm site) and the service account Slurm's ``operator`` admin level,
which lets it resize and cancel other users' jobs, as the manager does on a real site.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from malleable.errors import ExternalError

if TYPE_CHECKING:
    from malleable.testbed.handle import TestbedHandle as Testbed

logger = logging.getLogger(__name__)

#: The service account (operator in Slurm's accounting).
SERVICE = "malleable"
#: The ordinary users (``malleable testbed exec --user alice SITE -- CMD``).
USERS = ("alice", "bob", "carol")
#: Their uids, the same on every container (the service account has 2000).
UIDS = {SERVICE: 2000, "alice": 2001, "bob": 2002, "carol": 2003}
#: The Slurm account every user belongs to.
ACCOUNT = "users"
#: Slurm's admin level of the service account.
ADMIN_LEVEL = "operator"
#: How long to wait for every cluster to appear in the accounting database.
REGISTER_WAIT = 120.0

CLUSTERS_ARGS = ("sacctmgr", "--noheader", "--parsable2", "list", "clusters",
                 "format=Cluster")


def parse_clusters(text: str) -> set[str]:
    """Cluster names from ``sacctmgr --noheader --parsable2 list clusters format=Cluster``."""
    return {line.strip().rstrip("|") for line in text.splitlines() if line.strip()}


def setup_commands(clusters: Sequence[str]) -> list[list[str]]:
    """The ``sacctmgr`` calls that create the account, the users and the operator level."""
    where = f"cluster={','.join(clusters)}"
    return [
        ["sacctmgr", "-i", "add", "account", ACCOUNT, where,
         "description=testbed users", "organization=testbed"],
        ["sacctmgr", "-i", "add", "user", ",".join((SERVICE, *USERS)), f"account={ACCOUNT}",
         f"defaultaccount={ACCOUNT}", where],
        ["sacctmgr", "-i", "modify", "user", "where", f"name={SERVICE}", "set",
         f"adminlevel={ADMIN_LEVEL}"],
    ]


def wait_registered(tb: Testbed, site: str, clusters: Sequence[str], timeout: float) -> None:
    """Wait until slurmdbd knows every cluster (each slurmctld registers itself at start)."""
    deadline = time.monotonic() + timeout
    while True:
        result = tb.exec(site, CLUSTERS_ARGS, timeout=30)
        known = parse_clusters(result.stdout) if result.ok else set()
        missing = sorted(set(clusters) - known)
        if not missing:
            return
        if time.monotonic() >= deadline:
            raise ExternalError(f"testbed {tb.name!r}: cluster(s) {', '.join(missing)} did not "
                                f"register with slurmdbd within {timeout:g} s")
        time.sleep(1.0)


def setup(tb: Testbed, clusters: Sequence[str], *, timeout: float = REGISTER_WAIT) -> None:
    """Associations for every user on every Slurm cluster; the service account an operator."""
    if not clusters:
        return
    site = clusters[0]
    wait_registered(tb, site, clusters, timeout)
    for argv in setup_commands(clusters):
        result = tb.exec(site, argv, timeout=60)
        if not result.ok and "Nothing new added" not in result.stdout + result.stderr:
            raise ExternalError(f"testbed {tb.name!r}: {' '.join(argv[:4])} ... failed: "
                                f"{(result.stderr or result.stdout).strip()}")
    logger.info("accounting: %s in account %s on %s; %s is %s", ", ".join(USERS), ACCOUNT,
                ", ".join(clusters), SERVICE, ADMIN_LEVEL)
