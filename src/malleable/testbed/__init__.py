"""The containerized multi-cluster Slurm testbed (code behind ``malleable testbed ...``).

Use :class:`Testbed` from Python::

    from malleable.testbed import Testbed, load_topology

    tb = Testbed("mytest")
    status = tb.up(load_topology("small"))    # builds images when missing, waits until idle
    ep = tb.endpoints()["vu"]                 # ep.host, ep.port, ep.user, ep.key, ep.known_hosts
    tb.exec("vu", ["sbatch", "--wrap", "hostname"], user="malleable")
    tb.down()

Files: Dockerfile, entrypoint and Slurm templates in ``testbed/`` of the checkout;
generated secrets and configuration in the state directory (see :mod:`.state`).
"""

from malleable.testbed.docker import Docker, Result
from malleable.testbed.info import Container, SiteEndpoint, SiteStatus, TestbedStatus
from malleable.testbed.runtime import Testbed
from malleable.testbed.topology import (
    BUILTIN,
    DAS3,
    SMALL,
    Site,
    Topology,
    load_topology,
    parse_topology,
)

__all__ = [
    "BUILTIN", "DAS3", "SMALL", "Container", "Docker", "Result", "Site", "SiteEndpoint",
    "SiteStatus", "Testbed", "TestbedStatus", "Topology", "load_topology", "parse_topology",
]
