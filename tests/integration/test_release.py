"""A release as docs/release.md makes it, installed, upgraded and rolled back by Ansible.

Two releases of this checkout are built by the documented procedure (``python3 -m build``:
the sdist, then the wheel from it), the second with a higher version. Their dependencies
are fetched once into a directory of wheels, as a site without the public index keeps
them (docs/release.md), and copied into one fresh container (the project's local Debian
base image with python3 and its venv added in a tiny cached layer). Then ``malleable.yml``
with only the client and the service roles:

1. installs the first wheel (``malleable_client_wheel``): ``malleable --version``,
   ``malleable app demo jacobi`` finds its example program in the wheel (the container has
   no Slurm, so the demo then stops at ``sbatch``, exit 3, as documented) and
   ``malleable manager serve --help`` runs; the service runs and answers ``status``;
2. upgrades to the second from the site's wheel directory (``malleable_client_version``
   with ``PIP_FIND_LINKS``); the service is restarted on the new version, its journal kept;
3. rolls back to the first wheel; the service runs the first version again.

And the role refuses, before anything is installed, to take malleable by name from the
public index. The container is named ``mall-release-*`` and removed at the end.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from malleable import __version__
from malleable.testbed import Docker
from malleable.testbed.images import ensure_base, image_id
from tests.fakes.waits import wait_for
from tests.integration.release import REPO, build_release

pytestmark = [pytest.mark.integration, pytest.mark.slow]

ANSIBLE = REPO / "ansible"
CA_BUNDLE = Path(os.environ.get("MALLEABLE_CA_BUNDLE", "/etc/ssl/certs/ca-certificates.crt"))
CA_IN_NODE = "/usr/local/share/host-ca-bundle.pem"
WHEELS_IN_NODE = "/srv/malleable-wheels"
NODE_DOCKERFILE = """ARG BASE_IMAGE
FROM ${BASE_IMAGE}
RUN apt-get update && apt-get install -y --no-install-recommends python3 python3-venv \\
    python3-packaging
"""
UPGRADE = f"{__version__}+upgrade1"


@dataclass
class Host:
    docker: Docker
    name: str
    tmp: Path
    wheel: Path
    upgrade: Path

    def sh(self, script: str, *, user: str = "root", check: bool = True) -> str:
        done = self.docker.docker_cmd("exec", "--user", user, self.name, "bash", "-lc", script,
                                      timeout=120, check=check)
        return done.stdout

    def run(self, script: str, *, user: str = "root") -> subprocess.CompletedProcess[str]:
        return subprocess.run(["docker", "exec", "--user", user, self.name, "bash", "-lc",
                               script], capture_output=True, text=True, timeout=120,
                              check=False)

    def play(self, name: str, extra: dict[str, object], *, ok: bool = True) -> str:
        """``malleable.yml`` with these variables; its output."""
        data = {"all": {
            "vars": {
                "ansible_connection": "community.docker.docker",
                "ansible_become": False,
                "ansible_python_interpreter": "/usr/bin/python3",
                "malleable_client_mpi": False,
                "malleable_manager_sites": [{"name": "lab"}],
                "malleable_manager_poll": 1.0,
                **extra,
            },
            "children": {
                "malleable_client": {"hosts": {"lab": {"ansible_host": self.name}}},
                "malleable_manager": {"hosts": {"lab": None}},
            },
        }}
        inventory = self.tmp / f"{name}.yml"
        inventory.write_text(json.dumps(data))  # JSON is YAML
        env = {**os.environ, "ANSIBLE_NOCOLOR": "1", "ANSIBLE_FORCE_COLOR": "0",
               "ANSIBLE_ROLES_PATH": str(ANSIBLE / "roles"),
               "ANSIBLE_CONFIG": str(ANSIBLE / "ansible.cfg")}
        start = time.monotonic()
        done = subprocess.run(["ansible-playbook", "-i", str(inventory), "malleable.yml"],
                              cwd=ANSIBLE, capture_output=True, text=True, env=env,
                              timeout=600, check=False)
        print(f"{name}: {time.monotonic() - start:.0f} s")
        assert (done.returncode == 0) == ok, (f"{name}:\n{done.stdout[-5000:]}\n"
                                              f"{done.stderr[-2000:]}")
        return done.stdout

    def version(self) -> str:
        return self.sh("/opt/malleable/venv/bin/malleable --version").strip()

    def service_pid(self) -> str:
        return self.sh("cat /run/malleable-manager.pid").strip()

    def wait_status(self) -> None:
        status = "malleable manager status --config /etc/malleable/manager.toml --json"
        wait_for(lambda: self.run(status, user="malleable").returncode == 0, 60,
                 "malleable manager status to answer")


def _node_image(docker: Docker) -> str:
    base = ensure_base(docker)
    digest = hashlib.sha256(((image_id(docker, base) or base) + NODE_DOCKERFILE).encode())
    tag = f"mall-release-node:{digest.hexdigest()[:12]}"
    if image_id(docker, tag) is None:
        docker.run(["docker", "build", "--quiet", "--build-arg", f"BASE_IMAGE={base}", "--tag",
                    tag, "-"], input_text=NODE_DOCKERFILE, timeout=900)
    return tag


def _wheelhouse(dest: Path, wheel: Path, upgrade: Path) -> Path:
    """The site's directory of wheels (docs/release.md): both releases and what they need."""
    dest.mkdir()
    subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--dest", str(dest),
                    f"malleable[service] @ {wheel.as_uri()}"], check=True, timeout=600,
                   capture_output=True)
    shutil.copy2(upgrade, dest / upgrade.name)
    return dest


@pytest.fixture(scope="module")
def host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Host]:
    if shutil.which("ansible-playbook") is None:
        pytest.fail("ansible-playbook is missing: pip install -e '.[dev]'")
    docker = Docker()
    if not docker.available():
        pytest.fail("no Docker engine answers: run `bash .ci/testbed-setup.sh` first")
    tmp = tmp_path_factory.mktemp("release")
    start = time.monotonic()
    wheel = build_release(tmp / "first")
    upgrade = build_release(tmp / "second", "+upgrade1")
    wheels = _wheelhouse(tmp / "wheels", wheel, upgrade)
    image = _node_image(docker)
    print(f"\nreleases, wheels and image: {time.monotonic() - start:.0f} s")
    name = f"mall-release-{uuid.uuid4().hex[:8]}"
    try:
        docker.docker_cmd("run", "--detach", "--init", "--name", name, "--hostname", "lab",
                          "--label", "org.malleable.release=1", image, "sleep", "infinity")
        docker.docker_cmd("cp", str(CA_BUNDLE), f"{name}:{CA_IN_NODE}")
        docker.docker_cmd("cp", str(wheels), f"{name}:{WHEELS_IN_NODE}")
        yield Host(docker, name, tmp, wheel, upgrade)
    finally:
        docker.docker_cmd("rm", "--force", "--volumes", name, check=False, timeout=120)


def test_the_release_files_hold_what_docs_release_md_says(host: Host) -> None:
    import tarfile
    import zipfile

    names = zipfile.ZipFile(host.wheel).namelist()
    data = f"malleable-{__version__}.data/data/share/malleable/examples"
    assert {f"{data}/{e}.py" for e in ("jacobi", "cg", "nbody", "fft")} <= set(names)
    assert "malleable/site/malleable-manager.service" in names
    assert any(n.endswith(".dist-info/LICENSE") or "/licenses/LICENSE" in n for n in names)
    (sdist,) = host.wheel.parent.glob("malleable-*.tar.gz")
    top = f"malleable-{__version__}"
    with tarfile.open(sdist) as tar:
        members = set(tar.getnames())
    assert {f"{top}/{f}" for f in ("LICENSE", "CHANGELOG.md", "examples/jacobi.py",
                                   "pyproject.toml", "src/malleable/__init__.py")} <= members


def test_install_upgrade_and_rollback_by_the_role(host: Host) -> None:
    local_index = {"PIP_NO_INDEX": "1", "PIP_FIND_LINKS": WHEELS_IN_NODE}
    # Never by name from the public index: refused before anything is installed.
    refused = host.play("refused", {"malleable_client_version": __version__}, ok=False)
    assert "not published on the public package index" in refused
    assert host.run("test -e /opt/malleable/venv").returncode != 0

    host.play("install", {"malleable_client_wheel": str(host.wheel),
                          "malleable_client_pip_environment": local_index})
    assert host.version() == f"malleable {__version__}"
    assert host.sh("malleable manager serve --help").startswith("usage: malleable manager serve")
    host.sh("printf '[clusters.lab]\\n' > /tmp/lab.toml")
    demo = host.run("cd /tmp && malleable app demo jacobi --config lab.toml --site lab "
                    "--schedule 1 --iterations 2")
    # The example comes from the wheel; with no Slurm here the job cannot be submitted.
    assert demo.returncode == 3, demo.stderr
    assert "not found in" not in demo.stderr and "sbatch" in demo.stderr, demo.stderr
    installed = host.sh("/opt/malleable/venv/bin/python3 -c 'from malleable.runner.demo import "
                        "example_source; print(example_source(\"jacobi\")[1], end=\"\")'")
    assert installed == (REPO / "examples" / "jacobi.py").read_text()
    host.wait_status()
    first_pid = host.service_pid()
    journal = host.sh("stat --format=%i /var/lib/malleable/state.sqlite").strip()

    host.play("upgrade", {"malleable_client_version": UPGRADE,
                          "malleable_client_pip_environment": local_index})
    assert host.version() == f"malleable {UPGRADE}"
    host.wait_status()
    assert host.service_pid() != first_pid  # restarted on the new version
    assert host.sh("stat --format=%i /var/lib/malleable/state.sqlite").strip() == journal

    host.play("rollback", {"malleable_client_wheel": str(host.wheel),
                           "malleable_client_pip_environment": local_index})
    assert host.version() == f"malleable {__version__}"
    host.wait_status()
    assert host.service_pid() != first_pid
    assert host.sh("ls /opt/malleable/wheels").split() == [host.wheel.name]
