"""The OAR side of a testbed site: its settings over the packaged ``oar.conf``, and the
pure parser of the node states that bring-up and ``testbed status`` read.

Pure functions: text in, text out. The container entrypoint applies the settings file
(``KEY="VALUE"`` replaces a key, ``-KEY`` removes it) at start.
"""

from __future__ import annotations

import json
from typing import Any

from malleable.testbed.topology import Site

#: Port of the sshd through which OAR's server reaches a node (OAR's own convention).
OAR_SSH_PORT = 6667
#: The node states of the whole site, one call (``oarnodes -J``: JSON keyed by resource id).
OARNODES_ARGS = ("oarnodes", "-J")
#: The jobs of the site that have not ended (JSON keyed by job id).
OARSTAT_ARGS = ("oarstat", "-J")
#: Seconds OAR keeps between the walltime of one job and the next (package default 60).
SECURITY_TIME = 1


def render_settings(site: Site, db_pass: str, db_pass_ro: str) -> str:
    """The lines the entrypoint applies to ``/etc/oar/oar.conf`` on every container of ``site``.

    The server and the database are on the site's controller; PostgreSQL listens on the
    testbed network with passwords. The cpuset job-resource manager (cgroup v1 only) is
    disabled: jobs are not confined to their nodes' CPUs (the emulated nodes share a
    container anyway). Walltime changes (``oarwalltime``) are enabled. The scheduler may
    run every second (the package's 5 s minimum makes a job wait up to 10 s to start).
    finaud checks every 30 s (package: 300 s) the nodes *with running jobs too*
    (``CHECK_NODES_WITH_RUNNING_JOB``, off in the package): without it OAR 2.5 never
    notices a node that dies under a job (the job stays Running until Leon exterminates
    it), and the adapter cannot shed it (docs/oar.md, "Dead nodes").
    """
    settings = {
        "DB_HOSTNAME": site.controller,
        "DB_BASE_PASSWD": db_pass,
        "DB_BASE_PASSWD_RO": db_pass_ro,
        "SERVER_HOSTNAME": site.controller,
        "WALLTIME_CHANGE_ENABLED": "yes",
        "SCHEDULER_JOB_SECURITY_TIME": str(SECURITY_TIME),
        "SCHEDULER_MIN_TIME_BETWEEN_2_CALLS": "1",
        "OARSTAT_DEFAULT_OUTPUT_FORMAT": "2",
        "FINAUD_FREQUENCY": "30",
        "CHECK_NODES_WITH_RUNNING_JOB": "yes",
    }
    lines = [f'{key}="{value}"' for key, value in settings.items()]
    lines.append("-CPUSET_PATH")
    return "\n".join(lines) + "\n"


def node_ssh_names(site: Site) -> list[str]:
    """The names OAR's ssh checks host keys under (``[NODE]:6667``)."""
    return [f"[{node}]:{OAR_SSH_PORT}" for node in site.node_names()]


def parse_node_states(text: str) -> dict[str, str]:
    """Node (network address) -> OAR state, lowercase, from ``oarnodes -J``.

    A node with several resources takes the state of its first one; the testbed has one
    resource per node.
    """
    doc: Any = json.loads(text) if text.strip() else {}
    resources = doc.values() if isinstance(doc, dict) else doc
    states: dict[str, str] = {}
    for res in resources:
        if isinstance(res, dict) and res.get("network_address"):
            states.setdefault(str(res["network_address"]), str(res.get("state", "")).lower())
    return states


def count_jobs(text: str) -> int:
    """How many jobs ``oarstat -J`` lists."""
    doc: Any = json.loads(text) if text.strip() else {}
    return len(doc) if isinstance(doc, dict | list) else 0
