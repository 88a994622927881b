"""From a configured site to the Slurm commands that reach it (SSH, local or REST)."""

from __future__ import annotations

import getpass

from malleable.adapters.reach import runner_for as runner_for  # callers import it from here
from malleable.adapters.shell import CommandRunner
from malleable.adapters.slurm.ctl import SlurmCtl
from malleable.config import SiteConfig
from malleable.errors import InputError


def ctl_for(site: SiteConfig, runner: CommandRunner | None = None) -> SlurmCtl:
    """The site's Slurm commands over SSH (or local without a host; or ``runner``), with its
    partition, command timeout and user. The registry picks this builder or, for a site with
    ``transport = "rest"``, :func:`rest_ctl` (:func:`malleable.kinds.commands`); a REST site
    has no SSH, so it is refused here unless a runner is given."""
    if site.rest is not None and runner is None:
        raise InputError(f"site {site.name} is reached through slurmrestd: its commands come "
                         "from malleable.kinds.commands(site)")
    user = getpass.getuser() if site.ssh is None else site.ssh.user
    return SlurmCtl(runner or runner_for(site), site.command_timeout, site.partition, user)


def rest_ctl(site: SiteConfig) -> SlurmCtl:
    """The site's Slurm commands over slurmrestd (:mod:`~.rest`; no SSH at all): the
    builder of Slurm's ``rest`` transport in :mod:`malleable.kinds`."""
    from malleable.adapters.slurm.rest import rest_ctl_for

    if site.rest is None:
        raise InputError(f"site {site.name} has no slurmrestd (transport = \"rest\", url = ...)")
    return rest_ctl_for(site.rest, site.command_timeout, site.partition)
