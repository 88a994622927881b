"""From a configured site to the Slurm commands that reach it (SSH, local or REST)."""

from __future__ import annotations

import getpass

from malleable.adapters.shell import CommandRunner, LocalRunner, SSHRunner
from malleable.adapters.slurm.ctl import SlurmCtl
from malleable.config import SiteConfig


def runner_for(site: SiteConfig) -> CommandRunner:
    """An SSH runner for a site with a host, a local one otherwise (no I/O yet)."""
    return LocalRunner() if site.ssh is None else SSHRunner(site.ssh)


def ctl_for(site: SiteConfig, runner: CommandRunner | None = None) -> SlurmCtl:
    """The site's Slurm commands, with its partition, command timeout and user: over
    slurmrestd for a site with ``transport = "rest"`` (:mod:`~.rest`; no SSH at all)."""
    if site.rest is not None and runner is None:
        from malleable.adapters.slurm.rest import rest_ctl_for

        return rest_ctl_for(site.rest, site.command_timeout, site.partition)
    user = getpass.getuser() if site.ssh is None else site.ssh.user
    return SlurmCtl(runner or runner_for(site), site.command_timeout, site.partition, user)
