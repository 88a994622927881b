"""Generate the Slurm configuration of each testbed site from the templates in testbed/slurm/.

Pure functions: the template text comes in, the file text goes out.
"""

from __future__ import annotations

from string import Template

from malleable.testbed.topology import Site

#: Slurm reacts within a second to submissions and resizes; ``permit_job_expansion`` lets a
#: running job grow by absorbing a helper allocation. ``defer`` must not be added (slower).
SCHEDULER_PARAMETERS = ("permit_job_expansion,batch_sched_delay=0,sched_min_interval=0,"
                        "sched_interval=5")
#: Hostname of the shared accounting container (slurmdbd + MariaDB).
DBD_HOST = "slurmdbd"
#: The partition every site has (all its nodes, the default).
PARTITION = "batch"
#: First port of the emulated nodes' slurmd daemons within a compute container.
SLURMD_BASE_PORT = 17001
#: Memory (MB) each emulated node declares, so that ``--mem`` requests (dask-jobqueue asks
#: one) can be satisfied. Declared, not enforced: there are no cgroups, and slurmd does not
#: compare it with the container's memory (``SlurmdParameters=config_overrides``).
REAL_MEMORY_MB = 4000


def node_lines(site: Site) -> list[str]:
    """One ``NodeName`` line per emulated node, with its container and its own port."""
    lines = []
    for host, nodes in site.layout().items():
        for index, node in enumerate(nodes):
            lines.append(
                f"NodeName={node} NodeHostname={host} NodeAddr={host} "
                f"Port={SLURMD_BASE_PORT + index} CPUs=1 RealMemory={REAL_MEMORY_MB} "
                f"State=UNKNOWN"
            )
    return lines


def render_slurm_conf(template: str, site: Site) -> str:
    """slurm.conf of one site: its ClusterName, its controller, its nodes."""
    return Template(template).substitute(
        cluster=site.name,
        controller=site.controller,
        dbd_host=DBD_HOST,
        scheduler_parameters=SCHEDULER_PARAMETERS,
        nodes="\n".join(node_lines(site)),
        partition=PARTITION,
    )


def render_slurmdbd_conf(template: str, storage_pass: str) -> str:
    """slurmdbd.conf of the shared accounting service."""
    return Template(template).substitute(dbd_host=DBD_HOST, storage_pass=storage_pass)
