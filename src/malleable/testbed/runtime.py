"""The Python face of a testbed: find it, look at it, run commands in it, reach its sites.

>>> from malleable.testbed import Testbed, load_topology
>>> tb = Testbed("t1")                       # no I/O here
>>> tb.up(load_topology("small"))            # build what is missing, start, wait until idle
>>> tb.endpoints()["vu"].port                # SSH to the vu site's login node
>>> tb.exec("vu", ["sinfo"]).stdout          # run a command on the vu controller
>>> tb.status().to_json()["sites"]["vu"]["idle"]
>>> tb.down()                                # cancel jobs, remove containers, network, state
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Sequence
from pathlib import Path

import malleable.testbed.clusters as clusters
import malleable.testbed.info as info
import malleable.testbed.sitekinds as sitekinds
from malleable.errors import ExternalError, InputError
from malleable.kinds import DEFAULT
from malleable.testbed.compose import LABEL_TESTBED, check_name, project_name
from malleable.testbed.docker import Docker, Result
from malleable.testbed.handle import Progress
from malleable.testbed.info import Container, SiteEndpoint, SiteStatus, TestbedStatus
from malleable.testbed.state import Record, StateDir, read_record, state_root
from malleable.testbed.topology import Topology
from malleable.testbed.versions import DEFAULT as DEFAULT_SLURM

logger = logging.getLogger(__name__)

PROJECT_LABEL = "com.docker.compose.project"
#: Seconds a testbed's REST token is valid (``testbed config --rest``): a day.
REST_TOKEN_LIFESPAN = 86400


def list_testbeds(docker: Docker | None = None) -> dict[str, dict[str, int]]:
    """Every testbed with containers on this engine: name -> {"running": n, "containers": m}."""
    docker = docker or Docker()
    out = docker.docker_cmd("ps", "--all", "--filter", f"label={LABEL_TESTBED}", "--format",
                            "{{.Label \"" + LABEL_TESTBED + "\"}} {{.State}}").stdout
    found: dict[str, dict[str, int]] = {}
    for line in out.splitlines():
        name, _, state = line.partition(" ")
        entry = found.setdefault(name, {"running": 0, "containers": 0})
        entry["containers"] += 1
        entry["running"] += state == "running"
    return dict(sorted(found.items()))


class Testbed:
    """One named testbed (a compose project); several can run side by side."""

    __test__ = False  # not a pytest class, despite its name

    def __init__(self, name: str = "default", *, root: Path | None = None,
                 docker: Docker | None = None) -> None:
        self.name = check_name(name)
        self.project = project_name(name)
        self.state = StateDir((root or state_root()) / name)
        self.docker = docker or Docker()

    # -- discovery -----------------------------------------------------------------------
    def record(self) -> Record:
        """What was brought up (InputError when this testbed is not up)."""
        return read_record(self.state)

    def containers(self) -> list[Container]:
        """Every container of this testbed's compose project (running or not)."""
        ids = self.docker.docker_cmd("ps", "--all", "--quiet", "--filter",
                                     f"label={PROJECT_LABEL}={self.project}").stdout.split()
        if not ids:
            return []
        return info.parse_inspect(self.docker.docker_cmd("inspect", *ids).stdout)

    def container(self, target: str) -> Container:
        """The container of a site (its controller), a container hostname, or a node name."""
        found = self.containers()
        matches: tuple[Callable[[Container], bool], ...] = (
            lambda c: c.role == "controller" and c.site == target,
            lambda c: c.hostname == target,
            lambda c: target in c.aliases and c.role == "compute",
        )
        for match in matches:
            for c in found:
                if match(c):
                    return c
        names = sorted({c.site for c in found if c.site} | {c.hostname for c in found})
        raise InputError(f"no site, container or node {target!r} in testbed {self.name!r}"
                         + (f"; try one of: {', '.join(names)}" if names else " (is it up?)"))

    # -- commands ------------------------------------------------------------------------
    def exec(self, target: str, argv: Sequence[str], *, user: str = "root",
             timeout: float = 60.0, check: bool = False, input_text: str | None = None,
             workdir: str | None = None) -> Result:
        """Run ``argv`` in a site's controller (or the named container/node's container).

        As ``user``: ``root`` (working directory ``/``), the service account ``malleable``
        or an ordinary user ``alice``, ``bob``, ``carol`` (working directory: their home on
        the site's shared ``/home``). With ``check``, a non-zero exit raises ExternalError.
        """
        full = self.exec_argv(target, argv, user=user, workdir=workdir,
                              interactive=input_text is not None)
        return self.docker.run(full, timeout=timeout, check=check, input_text=input_text)

    def exec_argv(self, target: str, argv: Sequence[str], *, user: str = "root",
                  workdir: str | None = None, interactive: bool = False,
                  tty: bool = False) -> list[str]:
        """The ``docker exec`` argv that runs ``argv`` in ``target`` (see :meth:`exec`)."""
        if not argv:
            raise InputError("no command given to run in the testbed (put it after --)")
        container = self.container(target)
        if not container.running:
            raise ExternalError(f"container {container.hostname} is {container.state}")
        workdir = workdir or (f"/home/{user}" if user != "root" else "/")
        args = [self.docker.docker, "exec", "--user", user, "--workdir", workdir]
        if interactive:
            args.append("--interactive")
        if tty:
            args.append("--tty")
        return [*args, container.id, *argv]

    # -- views ---------------------------------------------------------------------------
    def endpoints(self, containers: Sequence[Container] | None = None
                  ) -> dict[str, SiteEndpoint]:
        """How to reach each site whose controller runs, keyed by site name."""
        rec = self.record()
        found = list(self.containers() if containers is None else containers)
        out = {}
        for site in rec.topology.sites:
            ctl = next((c for c in found if c.role == "controller" and c.site == site.name), None)
            if ctl is None or ctl.ssh_port is None or ctl.address is None:
                continue
            out[site.name] = SiteEndpoint(
                site=site.name, controller=site.controller,
                host=info.PUBLISH_HOST, port=ctl.ssh_port, address=ctl.address, user=info.USER,
                key=str(self.state.secrets / "id_ed25519"),
                known_hosts=str(self.state.secrets / "known_hosts"),
                nodes=site.nodes, compute=tuple(site.compute_hosts()), kind=site.kind,
                **sitekinds.of(site.kind).endpoint(site, ctl.rest_port))
        return out

    def rest_token(self, site: str, lifespan: int = REST_TOKEN_LIFESPAN) -> Path:
        """A JWT of the service account for ``site``'s slurmrestd, made in its controller with
        ``scontrol token`` (as root: only root and SlurmUser may issue tokens for another
        user), written to the state directory's secrets (mode 0600; renewed by calling this
        again). ExternalError if Slurm refuses."""
        result = self.exec(site, ["scontrol", "token", f"username={info.USER}",
                                  f"lifespan={int(lifespan)}"], timeout=30)
        token = result.stdout.strip().removeprefix("SLURM_JWT=")
        if not result.ok or not token or any(c.isspace() for c in token):
            raise ExternalError(f"scontrol token on {site} failed: "
                                f"{(result.stderr or result.stdout).strip()[:200]}")
        path = self.state.secrets / f"rest-{site}.token"
        tmp = path.with_suffix(".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as out:
            out.write(token + "\n")
        os.replace(tmp, path)
        return path

    def config_toml(self, rest: bool = False,
                    token_lifespan: int = REST_TOKEN_LIFESPAN) -> str:
        """The clusters config (TOML) of this testbed; ExternalError if a site is down.
        With ``rest``, its Slurm sites are reached through slurmrestd (a fresh token file
        each, :meth:`rest_token`) and hold no SSH key."""
        rec = self.record()
        eps = self.endpoints()
        missing = [s.name for s in rec.topology.sites if s.name not in eps]
        if missing:
            raise ExternalError(f"site(s) {', '.join(missing)} of testbed {self.name!r} are not "
                                f"running; see: malleable testbed status --name {self.name}")
        tokens: dict[str, str] = {}
        if rest:
            for ep in eps.values():
                if not sitekinds.of(ep.kind).rest:
                    continue
                if not ep.rest_url:
                    raise ExternalError(f"site {ep.site} of testbed {self.name!r} publishes no "
                                        "slurmrestd port (brought up by an older version? "
                                        "take it down and up again)")
                tokens[ep.site] = str(self.rest_token(ep.site, token_lifespan))
        return clusters.render_clusters_toml(self.name, eps.values(), tokens)

    def site_status(self, site: str, ctl: Container | None, nodes: int,
                    endpoint: SiteEndpoint | None, kind: str = DEFAULT) -> SiteStatus:
        if ctl is None or not ctl.running:
            return SiteStatus(site, f"{site}-ctl", ctl.state if ctl else "missing",
                              ctl.health if ctl else None, nodes, {}, 0, endpoint,
                              "controller not running", kind)
        return sitekinds.of(kind).status(self, site, ctl, nodes, endpoint)

    def rest_health(self, site: str, endpoint: SiteEndpoint | None) -> str:
        """slurmrestd's health: ``ok (vX)`` when it answers a ping with a short-lived token
        of the service account, else what is wrong (never raises)."""
        if endpoint is None or not endpoint.rest_url:
            return "no published port"
        from malleable.adapters.slurm.rest import rest_health

        token = self.exec(site, ["scontrol", "token", f"username={info.USER}", "lifespan=60"],
                          timeout=30)
        if not token.ok:
            return f"no token: {token.stderr.strip()[:120]}"
        return rest_health(endpoint.rest_url, token.stdout.strip().removeprefix("SLURM_JWT="))

    def status(self) -> TestbedStatus:
        """Every site's controller, node states and queue length (InputError if not up)."""
        rec = self.record()
        found = self.containers()
        eps = self.endpoints(found)
        sites = {}
        for site in rec.topology.sites:
            ctl = next((c for c in found if c.role == "controller" and c.site == site.name), None)
            sites[site.name] = self.site_status(site.name, ctl, site.nodes, eps.get(site.name),
                                                site.kind)
        healthy = sum(1 for c in found if c.healthy)
        up = healthy == len(found) == rec.topology.total_containers and all(
            s.idle == s.nodes for s in sites.values())
        return TestbedStatus(self.name, self.project, rec.topology.name, up, sites,
                             tuple(found))

    # -- life cycle (see bringup.py) -----------------------------------------------------
    def up(self, topology: Topology, *, base_image: str | None = None, rebuild: bool = False,
           timeout: float = 600.0, progress: Progress | None = None,
           slurm: str = DEFAULT_SLURM) -> TestbedStatus:
        """Bring the testbed up with Slurm version ``slurm`` (idempotent for the same
        topology and version); return its status."""
        import malleable.testbed.bringup as bringup

        return bringup.up(self, topology, base_image=base_image, rebuild=rebuild,
                          timeout=timeout, progress=progress, slurm=slurm)

    def down(self, *, timeout: float = 120.0) -> None:
        """Cancel every job, then remove containers, network and state (secrets included)."""
        import malleable.testbed.bringup as bringup

        bringup.down(self, timeout=timeout)

    def diagnostics(self) -> str:
        """sinfo, squeue and log tails of every site, as text (for failed bring-ups)."""
        import malleable.testbed.bringup as bringup

        return bringup.diagnostics(self)
