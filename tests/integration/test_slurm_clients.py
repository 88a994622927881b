"""Ordinary Slurm clients against a testbed site, run as a user on its login node.

submitit (submit, poll through sacct, result, cancel, a job array) and dask-jobqueue's
SLURMCluster (two workers asking --mem, a map, scale down, close) run unchanged as
``alice`` on ``vu``'s login node: what they need from the site is a shared /home (job
folders, the user's packages) and nodes that declare memory. The clients are installed as
a user would without a package index: the host's copies (the ``dev`` extra installs them)
are unpacked into alice's ``~/.local`` user site; dask's ``distributed`` comes with the
image (Debian's python3-distributed).
"""

from __future__ import annotations

import base64
import importlib.util
import io
import json
import tarfile
from pathlib import Path

import pytest

from malleable.testbed import Testbed
from tests.fakes.waits import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

SITE = "vu"
USER = "alice"
CLIENTS = Path(__file__).resolve().parent / "clients"


def _package_dir(name: str) -> Path:
    spec = importlib.util.find_spec(name)
    if spec is None or spec.origin is None:
        pytest.fail(f"{name} is not installed on the host: pip install -e '.[dev]'")
    return Path(spec.origin).parent


def _tarball(paths: dict[str, Path]) -> str:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        for arcname, path in paths.items():
            tar.add(path, arcname=arcname,
                    filter=lambda t: None if "__pycache__" in t.name else t)
    return base64.b64encode(buffer.getvalue()).decode()


@pytest.fixture(scope="module")
def alice_site(small_testbed: Testbed) -> Testbed:
    """alice's user site on vu holds submitit and dask_jobqueue, her home the clients."""
    site_dir = small_testbed.exec(SITE, ["python3", "-c", "import site; "
                                         "print(site.getusersitepackages())"],
                                  user=USER, check=True).stdout.strip()
    packages = {name: _package_dir(name) for name in ("submitit", "dask_jobqueue")}
    small_testbed.exec(SITE, ["sh", "-c", f"mkdir -p {site_dir} && base64 -d | tar -xz -C "
                              f"{site_dir}"], user=USER, check=True,
                       input_text=_tarball(packages))
    small_testbed.exec(SITE, ["sh", "-c", "base64 -d | tar -xz"], user=USER, check=True,
                       input_text=_tarball({p.name: p for p in CLIENTS.glob("*.py")}))
    return small_testbed


def _sacct(tb: Testbed, job: str) -> list[str]:
    out = tb.exec(SITE, ["sacct", "--noheader", "--parsable2", "--allocations", "--jobs", job,
                         "--format=User,State"], check=True).stdout
    return out.split()


def test_submitit_submits_polls_cancels_and_maps(alice_site: Testbed) -> None:
    result = alice_site.exec(SITE, ["python3", "submitit_client.py", "submitit-jobs"],
                             user=USER, timeout=600)
    assert result.ok, result.stderr[-2000:]
    out = json.loads(result.stdout.strip().splitlines()[-1])
    assert out["result"] == 144 and out["state"] == "COMPLETED"
    assert out["sleeper_running"] == "RUNNING" and out["sleeper_state"] == "CANCELLED"
    assert out["array"] == [1, 4, 9] and len(out["array_ids"]) == 3
    assert _sacct(alice_site, out["job_id"]) == ["alice|COMPLETED"]
    assert _sacct(alice_site, out["sleeper_id"])[0].startswith("alice|CANCELLED")
    # the job folder is in alice's home, written by the nodes, read on the login node
    listing = alice_site.exec("vu-c1", ["ls", f"/home/{USER}/submitit-jobs"], user=USER,
                              check=True).stdout.split()
    assert out["job_id"] in listing


def test_dask_jobqueue_two_workers_map_scale_down_close(alice_site: Testbed) -> None:
    result = alice_site.exec(SITE, ["python3", "dask_client.py", "dask-logs"], user=USER,
                             timeout=600)
    assert result.ok, result.stderr[-2000:]
    out = json.loads(result.stdout.strip().splitlines()[-1])
    assert "#SBATCH --mem=" in out["script"]
    assert out["sum"] == 285
    assert all(h.startswith(f"{SITE}-c") for h in out["worker_hosts"])
    assert len(out["worker_hosts"]) == 2
    assert out["after_scale_down"] == 1

    def queue() -> list[str]:
        return alice_site.exec(SITE, ["squeue", "--noheader", "--user", USER, "--name",
                                      "dask-test", "--format=%i"], check=True).stdout.split()

    wait_for(lambda: queue() == [], 60, "close() to end the workers' jobs")
