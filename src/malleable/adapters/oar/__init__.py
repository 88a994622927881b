"""The OAR adapter: parsers, commands, and the :class:`OarCluster` resource manager with
malleability emulated by extension jobs (see docs/oar.md)."""

from malleable.adapters.oar.cluster import OarCluster
from malleable.adapters.oar.ctl import OarCtl
from malleable.adapters.oar.payload import OarPayload

__all__ = ["OarCluster", "OarCtl", "OarPayload"]
