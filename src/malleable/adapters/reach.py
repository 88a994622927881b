"""How a configured site is reached, whatever its kind: the runner of its commands (SSH
to its ``host``, or local commands for a site without one). Each kind's ``commands``
builder (``adapters/slurm/sites.py``, ``adapters/oar/sites.py``) wraps it in its own
commands."""

from __future__ import annotations

from malleable.adapters.shell import CommandRunner, LocalRunner, SSHRunner
from malleable.config import SiteConfig


def runner_for(site: SiteConfig) -> CommandRunner:
    """An SSH runner for a site with a host, a local one otherwise (no I/O yet)."""
    return LocalRunner() if site.ssh is None else SSHRunner(site.ssh)
