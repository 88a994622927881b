"""The compose project of a testbed, built as data (written as JSON, which is valid YAML).

No fixed container names and no fixed subnets: the compose project name (``malleable-NAME``)
keeps several testbeds apart, compose makes one network per project, and each service's
hostname is what Slurm and SSH use inside that network. Only the controllers' sshd is
published on 127.0.0.1, on a port chosen free at bring-up and written into the compose file
(not left to Docker, which picks another one each time a stopped container starts again), so
a controller container that is stopped and started keeps its address and a running manager
reaches it again.

Start order: the accounting service becomes healthy, the compute containers start (so
their names resolve), then each site's controller starts. An OAR site's server starts
once its node containers are healthy (OAR suspects a node whose sshd does not answer
when it is added).

Every site's containers (controller and compute, Slurm or OAR) share one named volume as
``/home``, as on a real cluster: a job's working directory and output, submitit's job
folder, an OAR job's directory (``oarexec`` runs it in the submitter's working directory on
the job's first node) are the same files on the login node and on the nodes. The volumes
belong to the compose project and go with ``compose down --volumes``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from malleable.errors import InputError
from malleable.kinds import builder
from malleable.testbed.slurmconf import DBD_HOST
from malleable.testbed.topology import Site, Topology

#: Testbed names: part of the compose project name, the state directory, labels.
TESTBED_NAME = re.compile(r"^[a-z0-9][a-z0-9_-]{0,30}$")
#: Label on every container: the testbed it belongs to.
LABEL_TESTBED = "org.malleable.testbed"
#: Label on every container: accounting, controller or compute.
LABEL_ROLE = "org.malleable.role"
#: Label on site containers: the site.
LABEL_SITE = "org.malleable.site"
#: slurmrestd's port in a Slurm controller, published on 127.0.0.1 on a port Docker picks
#: (read back from ``docker inspect``; it may change when the container restarts).
REST_PORT = 6820
PUBLISH_REST = "127.0.0.1"
#: Mount points of the state directory's parts inside the containers.
SECRETS_MOUNT = "/testbed/secrets"
ETC_MOUNT = "/testbed/etc"

_HEALTHCHECK = {
    "test": ["CMD", "/usr/local/sbin/testbed-healthcheck"],
    "interval": "2s",
    "timeout": "20s",
    "retries": 30,
    "start_period": "180s",
}


def check_name(name: str) -> str:
    """A valid testbed name, or an InputError saying what is allowed."""
    if not TESTBED_NAME.match(name):
        raise InputError(f"bad testbed name {name!r}: use lowercase letters, digits, '-' and '_' "
                         "(at most 31 characters, starting with a letter or digit)")
    return name


def project_name(name: str) -> str:
    """The compose project of testbed ``name``."""
    return f"malleable-{check_name(name)}"


def _service(image: str, name: str, role: str, command: list[str], secrets: Path, etc: Path,
             site: str | None = None) -> dict[str, Any]:
    labels = {LABEL_TESTBED: name, LABEL_ROLE: role}
    if site is not None:
        labels[LABEL_SITE] = site
    return {
        "image": image,
        "command": command,
        "init": True,
        "volumes": [f"{secrets}:{SECRETS_MOUNT}:ro", f"{etc}:{ETC_MOUNT}:ro"],
        "healthcheck": dict(_HEALTHCHECK),
        "stop_grace_period": "5s",
        "labels": labels,
    }


def home_volume(site: Site) -> str:
    """The compose volume that is ``/home`` on every container of a site."""
    return f"{site.name}-home"


def home_mount(site: Site) -> dict[str, Any]:
    """The site's ``/home`` mount, without Docker's copy of the image's ``/home`` into the new
    volume (``nocopy``): several containers of a site start at once, and that copy raced in
    a run here ("failed to mkdir .../_data/bob: file exists", the bring-up failed). The
    entrypoint makes every home (``setup_homes``); the image's skeleton files are not used."""
    return {"type": "volume", "source": home_volume(site), "target": "/home",
            "volume": {"nocopy": True}}


def _published(port: int | None) -> list[str]:
    """The controller's sshd on 127.0.0.1: on ``port``, or on one Docker picks when None."""
    return [f"127.0.0.1:{port or ''}:22"]


def oar_site_services(site: Site, image: str, name: str, secrets: Path, etc: Path,
                      port: int | None = None) -> dict[str, dict[str, Any]]:
    services: dict[str, dict[str, Any]] = {}
    home = home_mount(site)
    for host, nodes in site.layout().items():
        svc = _service(image, name, "compute", ["oar-node", site.name], secrets, etc, site.name)
        svc["hostname"] = host
        svc["networks"] = {"default": {"aliases": list(nodes)}}
        svc["volumes"].append(home)
        services[host] = svc
    ctl = _service(image, name, "controller", ["oar-server", site.name, *site.node_names()],
                   secrets, etc, site.name)
    ctl["hostname"] = site.controller
    ctl["ports"] = _published(port)
    ctl["volumes"].append(home)
    ctl["depends_on"] = {h: {"condition": "service_healthy"} for h in site.compute_hosts()}
    services[site.controller] = ctl
    return services


def slurm_site_services(site: Site, image: str, name: str, secrets: Path, etc: Path,
                        port: int | None = None) -> dict[str, dict[str, Any]]:
    services: dict[str, dict[str, Any]] = {}
    home = home_mount(site)
    for host, nodes in site.layout().items():
        svc = _service(image, name, "compute", ["compute", site.name, *nodes], secrets, etc,
                       site.name)
        svc["hostname"] = host
        svc["networks"] = {"default": {"aliases": list(nodes)}}
        svc["depends_on"] = {DBD_HOST: {"condition": "service_healthy"}}
        svc["volumes"].append(home)
        services[host] = svc
    ctl = _service(image, name, "controller", ["controller", site.name], secrets, etc, site.name)
    ctl["hostname"] = site.controller
    ctl["ports"] = [*_published(port), f"{PUBLISH_REST}::{REST_PORT}"]
    ctl["volumes"].append(home)
    ctl["depends_on"] = {DBD_HOST: {"condition": "service_healthy"},
                         **{h: {"condition": "service_started"} for h in site.compute_hosts()}}
    services[site.controller] = ctl
    return services


def compose_project(topology: Topology, name: str, image: str, state_dir: Path,
                    ports: Mapping[str, int] | None = None) -> dict[str, Any]:
    """The compose document of a testbed whose state lives in ``state_dir``; ``ports``
    gives each site's published SSH port (Docker picks one for a site without)."""
    secrets, etc = state_dir / "secrets", state_dir / "etc"
    services: dict[str, dict[str, Any]] = {}
    if topology.has_slurm:
        dbd = _service(image, name, "accounting", ["accounting"], secrets, etc)
        dbd["hostname"] = DBD_HOST
        services[DBD_HOST] = dbd
    for site in topology.sites:
        services.update(builder(site.kind, "testbed", "the testbed").services(
            site, image, name, secrets, etc, (ports or {}).get(site.name)))
    doc: dict[str, Any] = {"version": "2.4", "services": services}
    volumes: dict[str, Any] = {home_volume(s): {} for s in topology.sites}
    if volumes:
        doc["volumes"] = volumes
    return doc
