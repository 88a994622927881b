"""From a configured OAR site to the OAR commands that reach it (SSH or local)."""

from __future__ import annotations

from malleable.adapters.oar.ctl import OarCtl
from malleable.adapters.reach import runner_for
from malleable.config import SiteConfig


def oar_ctl_for(site: SiteConfig) -> OarCtl:
    """The site's OAR commands with its command timeout (no I/O yet)."""
    return OarCtl(runner_for(site), site.command_timeout)
