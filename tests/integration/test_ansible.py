"""ansible/ against fresh containers, verified as a site administrator would.

Two fresh containers (``ctl``: controller, accounting, site service and a second compute
node; ``c0``: a compute node) from the project's local base image with python3 added in a
tiny layer, reached over the ``community.docker.docker`` connection; ``site.yml`` from
nothing; then ``sinfo``, ``scontrol show config``, ``sacctmgr``, ``malleable manager
status``, and alice's ``malleable submit`` grown by the deployed service (``scontrol show
job``); a second run with ``changed=0``; ``malleable.yml`` merging ``permit_job_expansion``
back into a slurm.conf that lost it; an upgrade to a newer wheel that keeps the journal; and
``malleable.yml`` on a running testbed site. Every container and network is named
``mall-ansible-*`` and removed at the end, whatever happened.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import logging
import os
import re
import shutil
import subprocess
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from malleable.testbed import SMALL, Docker, Testbed
from malleable.testbed.images import ensure_base, image_id
from tests.fakes.waits import wait_for
from tests.integration.release import build_release

pytestmark = [pytest.mark.integration, pytest.mark.slow]
logger = logging.getLogger(__name__)

REPO = Path(__file__).resolve().parents[2]
ANSIBLE = REPO / "ansible"
CA_BUNDLE = Path(os.environ.get("MALLEABLE_CA_BUNDLE", "/etc/ssl/certs/ca-certificates.crt"))
CA_IN_NODE = "/usr/local/share/host-ca-bundle.pem"
NODE_DOCKERFILE = """ARG BASE_IMAGE
FROM ${BASE_IMAGE}
RUN apt-get update && apt-get install -y --no-install-recommends python3 \\
 && rm -rf /var/lib/apt/lists/*
"""
PLAYBOOK_TIMEOUT = 1500.0
ALICE_UID = 2001


@dataclass
class Site:
    docker: Docker
    names: dict[str, str]
    inventory: Path
    wheel: Path
    upgrade_wheel: Path
    timings: dict[str, float]

    def sh(self, host: str, script: str, *, user: str = "root", timeout: float = 60,
           check: bool = True) -> str:
        result = self.docker.docker_cmd("exec", "--user", user, self.names[host], "bash", "-lc",
                                        script, timeout=timeout, check=check)
        return result.stdout


def _playbook(inventory: Path, playbook: str, *extra: str) -> tuple[str, float]:
    env = {**os.environ, "ANSIBLE_NOCOLOR": "1", "ANSIBLE_FORCE_COLOR": "0",
           "ANSIBLE_ROLES_PATH": str(ANSIBLE / "roles"),
           "ANSIBLE_CONFIG": str(ANSIBLE / "ansible.cfg")}
    start = time.monotonic()
    proc = subprocess.run(["ansible-playbook", "-i", str(inventory), playbook, *extra],
                          cwd=ANSIBLE, capture_output=True, text=True, env=env,
                          timeout=PLAYBOOK_TIMEOUT, check=False)
    elapsed = time.monotonic() - start
    logger.info("%s took %.0f s", playbook, elapsed)
    assert proc.returncode == 0, f"{playbook} failed:\n{proc.stdout[-6000:]}\n{proc.stderr[-3000:]}"
    return proc.stdout, elapsed


def _recap(stdout: str) -> dict[str, dict[str, int]]:
    """The PLAY RECAP counters per host."""
    recap: dict[str, dict[str, int]] = {}
    for host, counters in re.findall(r"^(\S+)\s+:\s+(ok=.*)$", stdout, re.M):
        recap[host] = {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", counters)}
    return recap


def _node_image(docker: Docker) -> str:
    """The local base image plus python3 (a cached layer; no registry)."""
    base = ensure_base(docker)
    digest = hashlib.sha256(((image_id(docker, base) or base) + NODE_DOCKERFILE).encode())
    tag = f"mall-ansible-node:{digest.hexdigest()[:12]}"
    if image_id(docker, tag) is None:
        docker.run(["docker", "build", "--quiet", "--build-arg", f"BASE_IMAGE={base}", "--tag",
                    tag, "-"], input_text=NODE_DOCKERFILE, timeout=900)
    return tag


def _inventory(path: Path, names: dict[str, str], wheel: Path) -> None:
    """The containers as an inventory; also an example of one for containers."""
    data = {
        "all": {
            "vars": {
                "ansible_connection": "community.docker.docker",
                "ansible_become": False,
                "ansible_python_interpreter": "/usr/bin/python3",
                "slurm_site_cluster_name": "lab",
                "malleable_client_wheel": str(wheel),
                "malleable_client_pip_environment": {"PIP_CERT": CA_IN_NODE},
                "malleable_manager_sites": [{"name": "lab"}],
                "malleable_manager_poll": 1.0,
                "malleable_manager_policy": "fpsma",
                "malleable_manager_policy_options": {"approach": "pra"},
            },
            "children": {
                "slurm_controller": {"hosts": {"ctl": {"ansible_host": names["ctl"],
                                                       "malleable_client_mpi": False}}},
                "slurm_dbd": {"hosts": {"ctl": None}},
                "slurm_compute": {"hosts": {"ctl": None,
                                            "c0": {"ansible_host": names["c0"]}}},
                "slurm_login": {"hosts": {}},
                "malleable_client": {"hosts": {"ctl": None, "c0": None}},
                "malleable_manager": {"hosts": {"ctl": None}},
            },
        },
    }
    path.write_text(json.dumps(data, indent=1))  # JSON is YAML


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Site]:
    if shutil.which("ansible-playbook") is None:
        pytest.fail("ansible-playbook is missing: pip install -e '.[dev]'")
    docker = Docker()
    if not docker.available():
        pytest.fail("no Docker engine answers: run `bash .ci/testbed-setup.sh` first")
    tmp = tmp_path_factory.mktemp("ansible")
    timings: dict[str, float] = {}
    start = time.monotonic()
    wheel = build_release(tmp / "wheel")
    upgrade = build_release(tmp / "upgrade", "+upgrade1")
    image = _node_image(docker)
    timings["images_and_wheels"] = time.monotonic() - start
    run = f"mall-ansible-{uuid.uuid4().hex[:8]}"
    names = {"ctl": f"{run}-ctl", "c0": f"{run}-c0"}
    try:
        docker.docker_cmd("network", "create", run)
        for host, name in names.items():
            # --init reaps the daemons' zombies; SYS_PTRACE lets the init scripts' status
            # read /proc/PID/exe of daemons owned by munge, mysql and slurm.
            docker.docker_cmd("run", "--detach", "--init", "--cap-add", "SYS_PTRACE",
                              "--name", name, "--hostname", host, "--network", run,
                              "--network-alias", host, "--label", "org.malleable.ansible=1",
                              image, "sleep", "infinity")
            docker.docker_cmd("cp", str(CA_BUNDLE), f"{name}:{CA_IN_NODE}")
            # An ordinary user of the site, the same uid everywhere.
            docker.docker_cmd("exec", name, "useradd", "--create-home", "--uid",
                              str(ALICE_UID), "alice")
        inventory = tmp / "inventory.yml"
        _inventory(inventory, names, wheel)
        yield Site(docker, names, inventory, wheel, upgrade, timings)
    finally:
        for name in names.values():
            docker.docker_cmd("rm", "--force", "--volumes", name, check=False, timeout=120)
        docker.docker_cmd("network", "rm", run, check=False)
        logger.info("ansible timings: %s", json.dumps(timings))
        print(f"\nansible timings (s): {json.dumps({k: round(v) for k, v in timings.items()})}")


def _job(site: Site, job_id: str) -> dict[str, str]:
    out = site.sh("ctl", f"scontrol show job --oneliner {job_id}", check=False)
    return dict(re.findall(r"(\w+)=(\S*)", out))


def test_site_yml_from_fresh_hosts_then_verified_as_an_administrator(site: Site) -> None:
    stdout, site.timings["site_cold"] = _playbook(site.inventory, "site.yml")
    assert _recap(stdout)["ctl"]["failed"] == 0

    sinfo = site.sh("ctl", "sinfo --noheader --Node --format='%N %t'")
    assert sorted(sinfo.split()) == sorted(["c0", "idle", "ctl", "idle"]), sinfo
    config = site.sh("ctl", "scontrol show config")
    assert re.search(r"SchedulerParameters\s*=.*permit_job_expansion", config)
    level = site.sh("ctl", "sacctmgr --noheader --parsable2 show user malleable format=AdminLevel")
    assert level.strip() == "Operator"

    status = "malleable manager status --config /etc/malleable/manager.toml --json"
    wait_for(lambda: site.docker.docker_cmd("exec", "--user", "malleable", site.names["ctl"],
                                            "bash", "-lc", status, check=False).ok,
             60, "malleable manager status to answer")
    answer = json.loads(site.sh("ctl", status, user="malleable"))
    assert answer, answer
    pid = site.sh("ctl", "cat /run/malleable-manager.pid").strip()
    environ = site.sh("ctl", f"tr '\\0' '\\n' < /proc/{pid}/environ",
                      user="malleable")  # root may not read it (no CAP_SYS_PTRACE)
    assert "MALLOC_ARENA_MAX=2" in environ.splitlines(), environ  # the role's default
    assert {"MALLOC_TRIM_THRESHOLD_=131072", "MALLOC_MMAP_THRESHOLD_=131072"} <= set(
        environ.splitlines()), environ

    job = site.sh("ctl", "cd && malleable submit --min 1 --max 2 --initial 1 -- sleep 600",
                  user="alice").strip()
    assert re.fullmatch(r"\d+", job), job
    wait_for(lambda: _job(site, job).get("JobState") == "RUNNING", 120,
             f"alice's job {job} released by the service")
    wait_for(lambda: _job(site, job).get("NumNodes") == "2", 180,
             f"alice's job {job} grown to 2 nodes by the service")
    shown = _job(site, job)
    assert shown["UserId"].startswith("alice"), shown
    site.sh("ctl", f"scancel {job}")


def test_second_run_changes_nothing(site: Site) -> None:
    stdout, site.timings["site_rerun"] = _playbook(site.inventory, "site.yml")
    recap = _recap(stdout)
    assert set(recap) == {"ctl", "c0"}
    changed = [line for line in stdout.splitlines() if line.startswith(("changed:", "TASK ["))]
    changed = [t for t, n in itertools.pairwise(changed) if n.startswith("changed:")]
    assert all(c["changed"] == 0 and c["failed"] == 0 for c in recap.values()), (recap, changed)


def test_malleable_yml_merges_permit_job_expansion_into_the_sites_own(site: Site) -> None:
    site.sh("ctl", "sed -i 's/^SchedulerParameters=.*/SchedulerParameters=sched_interval=7/' "
                   "/etc/slurm/slurm.conf && scontrol reconfigure")
    stdout, site.timings["malleable_merge"] = _playbook(site.inventory, "malleable.yml")
    assert _recap(stdout)["ctl"]["changed"] >= 1
    line = site.sh("ctl", "grep '^SchedulerParameters=' /etc/slurm/slurm.conf").strip()
    assert line == "SchedulerParameters=sched_interval=7,permit_job_expansion", line
    config = site.sh("ctl", "scontrol show config")
    assert re.search(r"SchedulerParameters\s*=\s*sched_interval=7,permit_job_expansion", config)


def test_upgrade_to_a_newer_wheel_keeps_the_journal(site: Site) -> None:
    journal = "/var/lib/malleable/state.sqlite"
    before = site.sh("ctl", f"stat --format=%i {journal}").strip()
    upgrade = site.inventory.with_name("upgrade.yml")
    upgrade.write_text(site.inventory.read_text().replace(str(site.wheel),
                                                          str(site.upgrade_wheel)))
    stdout, site.timings["upgrade"] = _playbook(upgrade, "malleable.yml")
    assert _recap(stdout)["ctl"]["changed"] >= 1
    version = site.sh("ctl", "/opt/malleable/venv/bin/python3 -c "
                             "'import importlib.metadata as m; print(m.version(\"malleable\"))'")
    assert version.strip().endswith("+upgrade1"), version
    assert site.sh("ctl", f"stat --format=%i {journal}").strip() == before
    site.sh("ctl", "/etc/init.d/malleable-manager status")
    status = "malleable manager status --config /etc/malleable/manager.toml --json"
    wait_for(lambda: site.docker.docker_cmd("exec", "--user", "malleable", site.names["ctl"],
                                            "bash", "-lc", status, check=False).ok,
             60, "the upgraded service to answer")


def test_malleable_yml_on_a_running_testbed_site(site: Site, tmp_path: Path) -> None:
    tb = Testbed(f"mall-ansible-tb-{uuid.uuid4().hex[:6]}", root=tmp_path / "tb",
                 docker=site.docker)
    try:
        tb.up(SMALL, timeout=600)
        ctl = tb.container("vu")
        site.docker.docker_cmd("cp", str(CA_BUNDLE), f"{ctl.id}:{CA_IN_NODE}")
        data = json.loads(site.inventory.read_text())
        data["all"]["vars"].update({
            "malleable_manager_sites": [{"name": "vu"}],
            # The testbed's service account exists already (uid 2000): keep it.
            "slurm_malleable_operator_uid": 2000, "malleable_manager_uid": 2000,
        })
        data["all"]["children"] = {
            "slurm_controller": {"hosts": {"vu-ctl": {"ansible_host": ctl.id,
                                                      "malleable_client_mpi": False}}},
            "malleable_client": {"hosts": {"vu-ctl": None}},
            "malleable_manager": {"hosts": {"vu-ctl": None}},
        }
        inventory = tmp_path / "testbed.yml"
        inventory.write_text(json.dumps(data))
        conf_before = tb.exec("vu", ["cat", "/etc/slurm/slurm.conf"], check=True).stdout
        stdout, site.timings["testbed_malleable_yml"] = _playbook(inventory, "malleable.yml")
        assert _recap(stdout)["vu-ctl"]["failed"] == 0
        assert tb.exec("vu", ["cat", "/etc/slurm/slurm.conf"], check=True).stdout == conf_before
        status = ["malleable", "manager", "status", "--config", "/etc/malleable/manager.toml"]
        wait_for(lambda: tb.exec("vu", status, user="malleable").ok, 60,
                 "the service on the testbed site to answer")
    finally:
        tb.down()
