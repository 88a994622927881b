"""The testbed side of each site kind: what ``malleable testbed`` does differently for a
Slurm and an OAR site, in one object per kind (:class:`TestbedKind`).

The adapter registry (:mod:`malleable.kinds`) names each kind's object as its ``testbed``
use (``malleable.testbed.sitekinds:SLURM``), so the testbed modules ask the registry
(:func:`of`; ``compose``, ``clusters``, ``topology`` and ``versions``, which this module
imports or whose types it names, ask :func:`malleable.kinds.builder` directly: no import
cycle) and never branch on a kind; a
third kind's testbed is one more such object.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, cast

import malleable.testbed.info as info
import malleable.testbed.oarconf as oarconf
from malleable import kinds
from malleable.testbed.clusters import OAR_COMMAND_TIMEOUT
from malleable.testbed.compose import oar_site_services, slurm_site_services
from malleable.testbed.slurmconf import PARTITION, render_slurm_conf

if TYPE_CHECKING:
    from malleable.testbed.handle import TestbedHandle
    from malleable.testbed.info import Container, SiteEndpoint, SiteStatus
    from malleable.testbed.topology import Site

#: OAR's states of a healthy node, as the Slurm states the bring-up waits for.
_OAR_SETTLED = {"alive": "idle"}


class TestbedKind(Protocol):
    """What the testbed needs of a site kind (every method is given one site's parts)."""

    name: str
    accounting: bool
    """Whether the kind's sites use the testbed's shared accounting service (slurmdbd)."""
    rest: bool
    """Whether the kind's controller publishes slurmrestd (``config --rest``)."""
    default_image_only: bool
    """Whether only the image of the default Slurm version carries the kind."""

    def write_config(self, site: Site, directory: Path, templates: Path) -> None:
        """Write the site's configuration files into ``directory`` (made, empty) from the
        testbed's files in ``templates``."""

    def ssh_names(self, site: Site) -> list[str]:
        """Host names the testbed's known_hosts pins besides controller, hosts and nodes."""

    def services(self, site: Site, image: str, name: str, secrets: Path, etc: Path,
                 port: int | None) -> dict[str, dict[str, Any]]:
        """The site's compose services (controller published on ``port``)."""

    def endpoint(self, site: Site, rest_port: int | None) -> dict[str, str]:
        """The kind's fields of the site's :class:`SiteEndpoint`: ``slurm_cluster``,
        ``partition``, ``rest_url``."""

    def config_keys(self, ep: SiteEndpoint) -> tuple[tuple[str, str | int | float], ...]:
        """The kind's keys of the site's clusters-config table (after ``kind``)."""

    def node_states(self, tb: TestbedHandle, site: str) -> dict[str, str]:
        """Node -> state, in Slurm's ``%T`` words (empty when unreadable)."""

    def status(self, tb: TestbedHandle, site: str, ctl: Container, nodes: int,
               endpoint: SiteEndpoint | None) -> SiteStatus:
        """The status of a site whose controller runs."""

    def diagnose(self, tb: TestbedHandle, c: Container) -> list[str]:
        """Diagnostic sections of one running container of the site."""

    def cancel_jobs(self, tb: TestbedHandle, controller: Container) -> bool:
        """Cancel every job of the site; whether the queue must then be waited on."""

    def has_jobs(self, tb: TestbedHandle, controller: Container) -> bool:
        """Whether the site still lists jobs."""


def of(kind: str) -> TestbedKind:
    """The testbed side of a kind, from the registry (InputError when it has none)."""
    return cast(TestbedKind, kinds.builder(kind, "testbed", "the testbed"))


def section(title: str, body: str) -> str:
    return f"== {title}\n{body.rstrip()}\n"


def tail_logs(tb: TestbedHandle, c: Container, pattern: str, lines: int = 30) -> str:
    result = tb.exec(c.hostname, ["sh", "-c", f"tail -n {lines} {pattern}"], timeout=30)
    return result.stdout + result.stderr


def _commands(tb: TestbedHandle, c: Container, argvs: tuple[tuple[str, ...], ...]
              ) -> list[str]:
    parts = []
    for argv in argvs:
        r = tb.exec(c.hostname, argv, timeout=30)
        parts.append(section(f"{c.hostname}: {argv[0]}", r.stdout + r.stderr))
    return parts


class SlurmTestbed:
    """A Slurm site: slurmctld (with slurmrestd) and slurmd containers, the shared slurmdbd."""

    name = "slurm"
    accounting = True
    rest = True
    default_image_only = False

    def write_config(self, site: Site, directory: Path, templates: Path) -> None:
        template = (templates / "slurm" / "slurm.conf.in").read_text(encoding="utf-8")
        (directory / "slurm.conf").write_text(render_slurm_conf(template, site),
                                              encoding="utf-8")

    def ssh_names(self, site: Site) -> list[str]:
        return []

    def services(self, site: Site, image: str, name: str, secrets: Path, etc: Path,
                 port: int | None) -> dict[str, dict[str, Any]]:
        return slurm_site_services(site, image, name, secrets, etc, port)

    def endpoint(self, site: Site, rest_port: int | None) -> dict[str, str]:
        return {"slurm_cluster": site.name, "partition": PARTITION,
                "rest_url": f"http://{info.PUBLISH_HOST}:{rest_port}" if rest_port else ""}

    def config_keys(self, ep: SiteEndpoint) -> tuple[tuple[str, str | int | float], ...]:
        return (("slurm_cluster", ep.slurm_cluster), ("partition", ep.partition))

    def node_states(self, tb: TestbedHandle, site: str) -> dict[str, str]:
        return info.parse_sinfo(tb.exec(site, info.SINFO_ARGS, timeout=30).stdout)

    def status(self, tb: TestbedHandle, site: str, ctl: Container, nodes: int,
               endpoint: SiteEndpoint | None) -> SiteStatus:
        sinfo = tb.exec(site, info.SINFO_ARGS, timeout=30)
        squeue = tb.exec(site, info.SQUEUE_ARGS, timeout=30)
        version = tb.exec(site, info.VERSION_ARGS, timeout=30)
        error = "; ".join(r.stderr.strip() for r in (sinfo, squeue) if not r.ok)
        return info.SiteStatus(site, ctl.hostname, ctl.state, ctl.health, nodes,
                               info.count_states(info.parse_sinfo(sinfo.stdout)),
                               len(info.parse_squeue(squeue.stdout)), endpoint, error,
                               slurm_version=(info.parse_version(version.stdout)
                                              if version.ok else ""),
                               rest=tb.rest_health(site, endpoint))

    def diagnose(self, tb: TestbedHandle, c: Container) -> list[str]:
        if c.role == "controller":
            return [*_commands(tb, c, (("sinfo",), ("squeue",))),
                    section(f"{c.hostname}: slurmctld.log",
                            tail_logs(tb, c, "/var/log/slurm/slurmctld.log"))]
        if c.role == "accounting":
            return [section(f"{c.hostname}: slurmdbd.log",
                            tail_logs(tb, c, "/var/log/slurm/slurmdbd.log"))]
        if not c.healthy:
            return [section(f"{c.hostname}: slurmd logs",
                            tail_logs(tb, c, "/var/log/slurm/slurmd-*.log", 5))]
        return []

    def cancel_jobs(self, tb: TestbedHandle, controller: Container) -> bool:
        tb.exec(controller.hostname, ["scancel", "--partition", PARTITION], timeout=30)
        return True

    def has_jobs(self, tb: TestbedHandle, controller: Container) -> bool:
        r = tb.exec(controller.hostname, info.SQUEUE_ARGS, timeout=30)
        return r.ok and bool(info.parse_squeue(r.stdout))


class OarTestbed:
    """An OAR site (docs/oar.md): an OAR server and oar-node containers, no accounting."""

    name = "oar"
    accounting = False
    rest = False
    default_image_only = True

    def write_config(self, site: Site, directory: Path, templates: Path) -> None:
        import malleable.testbed.secrets as secrets  # needs the testbed extra (cryptography)

        settings = directory / "oar-settings"
        settings.write_text(oarconf.render_settings(site, secrets.password(),
                                                    secrets.password()), encoding="utf-8")
        settings.chmod(0o600)

    def ssh_names(self, site: Site) -> list[str]:
        return oarconf.node_ssh_names(site)

    def services(self, site: Site, image: str, name: str, secrets: Path, etc: Path,
                 port: int | None) -> dict[str, dict[str, Any]]:
        return oar_site_services(site, image, name, secrets, etc, port)

    def endpoint(self, site: Site, rest_port: int | None) -> dict[str, str]:
        return {"slurm_cluster": "", "partition": "", "rest_url": ""}

    def config_keys(self, ep: SiteEndpoint) -> tuple[tuple[str, str | int | float], ...]:
        return (("command_timeout", OAR_COMMAND_TIMEOUT),)

    def node_states(self, tb: TestbedHandle, site: str) -> dict[str, str]:
        """OAR's Alive says nothing about jobs: the nodes of an OAR site with running jobs
        show as ``idle`` too (``testbed status`` counts its jobs separately)."""
        result = tb.exec(site, oarconf.OARNODES_ARGS, timeout=30)
        if not result.ok:
            return {}
        try:
            states = oarconf.parse_node_states(result.stdout)
        except ValueError:
            return {}
        return {n: _OAR_SETTLED.get(s, s) for n, s in states.items()}

    def status(self, tb: TestbedHandle, site: str, ctl: Container, nodes: int,
               endpoint: SiteEndpoint | None) -> SiteStatus:
        states = self.node_states(tb, site)
        oarstat = tb.exec(site, oarconf.OARSTAT_ARGS, timeout=30)
        try:
            jobs = oarconf.count_jobs(oarstat.stdout) if oarstat.ok else 0
        except ValueError:
            jobs = 0
        error = "" if states and oarstat.ok else (oarstat.stderr.strip() or "oarnodes failed")
        return info.SiteStatus(site, ctl.hostname, ctl.state, ctl.health, nodes,
                               info.count_states(states), jobs, endpoint, error, self.name)

    def diagnose(self, tb: TestbedHandle, c: Container) -> list[str]:
        if c.role != "controller":
            return []
        return [*_commands(tb, c, (("oarnodes", "-s"), ("oarstat",))),
                section(f"{c.hostname}: oar.log", tail_logs(tb, c, "/var/log/oar.log"))]

    def cancel_jobs(self, tb: TestbedHandle, controller: Container) -> bool:
        """Nothing to do: an OAR site's jobs' processes live in its own containers."""
        return False

    def has_jobs(self, tb: TestbedHandle, controller: Container) -> bool:
        return False


SLURM: TestbedKind = SlurmTestbed()
OAR: TestbedKind = OarTestbed()
