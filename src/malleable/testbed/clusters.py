"""The clusters config of a testbed (TOML), as ``malleable testbed config`` prints it.

One ``[clusters.SITE]`` table per site::

    [clusters.vu]
    kind = "slurm"              # the adapter to use
    slurm_cluster = "vu"        # Slurm's ClusterName (sacct -M, squeue -M)
    partition = "batch"
    nodes = 85
    host = "127.0.0.1"          # the site's login/controller sshd, published on the host
    port = 49153
    address = "172.19.0.7"      # the same sshd on the testbed network (port 22)
    user = "malleable"
    key = "/root/.local/state/malleable/testbeds/default/secrets/id_ed25519"
    known_hosts = "/root/.local/state/malleable/testbeds/default/secrets/known_hosts"
    controller = "vu-ctl"       # hostname inside the testbed
    host_key_alias = "vu-ctl"   # the host key is pinned to this name, not to the port

An OAR site has ``kind = "oar"``, neither ``slurm_cluster`` nor ``partition``, and
``command_timeout = 120`` (:data:`OAR_COMMAND_TIMEOUT`): OAR's client tools are perl
programs that start a database connection each, and took 10-30 s per call on the shared
2-core machine under load, past the 30 s default (edit the key to change it).

With ``--rest`` (``malleable testbed config --rest``) a Slurm site is reached through its
slurmrestd instead, with a token file of the service account and no SSH key::

    [clusters.vu]
    kind = "slurm"
    transport = "rest"
    url = "http://127.0.0.1:49154"
    token_file = "/root/.local/state/malleable/testbeds/default/secrets/rest-vu.token"
    ...

The manager and the other commands read it with ``--config FILE``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping

from malleable.kinds import builder
from malleable.testbed.info import SiteEndpoint

#: Seconds per OAR command in a testbed's clusters config (the default, 30, is Slurm's).
OAR_COMMAND_TIMEOUT = 120


def _value(value: str | int) -> str:
    # A JSON string literal is a valid TOML basic string for the text we write.
    return str(value) if isinstance(value, int) else json.dumps(value)


def render_clusters_toml(testbed: str, endpoints: Iterable[SiteEndpoint],
                         rest_tokens: Mapping[str, str] | None = None) -> str:
    """The config; a site with an entry in ``rest_tokens`` (its token file) is reached
    through slurmrestd (``transport = "rest"``, ``url``, ``token_file``), without SSH."""
    lines = [f"# Clusters of the malleable testbed {testbed!r} (malleable testbed config "
             f"--name {testbed}).", "# Regenerated at every bring-up: ports and keys change.", ""]
    for ep in endpoints:
        lines.append(f"[clusters.{ep.site}]")
        token = (rest_tokens or {}).get(ep.site)
        if token is not None:
            for key, value in (("kind", ep.kind), ("transport", "rest"), ("url", ep.rest_url),
                               ("token_file", token), ("slurm_cluster", ep.slurm_cluster),
                               ("partition", ep.partition), ("nodes", ep.nodes),
                               ("controller", ep.controller)):
                lines.append(f"{key} = {_value(value)}")
            lines.append("")
            continue
        names = (("kind", ep.kind), *builder(ep.kind, "testbed", "the testbed").config_keys(ep))
        for key, value in (*names, ("nodes", ep.nodes), ("host", ep.host),
                           ("port", ep.port), ("address", ep.address), ("user", ep.user),
                           ("key", ep.key), ("known_hosts", ep.known_hosts),
                           ("controller", ep.controller),
                           ("host_key_alias", ep.controller)):
            lines.append(f"{key} = {_value(value)}")
        lines.append("")
    return "\n".join(lines)
