"""``malleable experiment koala --quick --executor slurm`` on a testbed site's login node.

As ``alice`` on ``vu``'s login node (submitit unpacked into her ``~/.local`` as in
test_slurm_clients.py; the image carries malleable and matplotlib): the 24 runs go out as
one job array of 8 tasks (3 runs each, at most 4 at once on the site's 4 nodes), and what
the sweep writes is compared with a local run of the same seeds, on the login node
(every file, figures included) and on the host (summary.json and report.md: the host's
matplotlib is another version, so its PNGs differ in bytes).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from malleable.cli import main
from malleable.testbed import Testbed
from tests.fakes.waits import wait_for
from tests.integration.test_slurm_clients import SITE, USER, _package_dir, _tarball

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

FILES = ("summary.json", "report.md", "fig7.png", "fig8.png")


@pytest.fixture(scope="module")
def alice_submitit(small_testbed: Testbed) -> Testbed:
    site_dir = small_testbed.exec(SITE, ["python3", "-c", "import site; "
                                         "print(site.getusersitepackages())"],
                                  user=USER, check=True).stdout.strip()
    small_testbed.exec(SITE, ["sh", "-c", f"mkdir -p {site_dir} && base64 -d | tar -xz -C "
                              f"{site_dir}"], user=USER, check=True,
                       input_text=_tarball({"submitit": _package_dir("submitit")}))
    return small_testbed


def _koala(tb: Testbed, out: str, *extra: str) -> float:
    start = time.monotonic()
    result = tb.exec(SITE, ["python3", "-m", "malleable", "experiment", "koala", "--quick",
                            "--out", out, "--json", *extra], user=USER, timeout=420)
    assert result.ok, result.stderr[-3000:]
    return time.monotonic() - start


def _read(tb: Testbed, path: str) -> bytes:
    import base64

    text = tb.exec(SITE, ["base64", "-w0", path], user=USER, check=True).stdout
    return base64.b64decode(text)


def _summary(data: bytes) -> dict[str, object]:
    summary: dict[str, object] = json.loads(data)
    summary.pop("out")
    return summary


def test_koala_quick_as_a_job_array_matches_a_local_run(alice_submitit: Testbed,
                                                        tmp_path: Path) -> None:
    tb = alice_submitit
    tb.exec(SITE, ["rm", "-rf", "koala-local", "koala-slurm"], user=USER, check=True)
    local_s = _koala(tb, "koala-local")
    slurm_s = _koala(tb, "koala-slurm", "--executor", "slurm", "--runs-per-task", "3",
                     "--max-tasks", "4")
    manifest = json.loads(_read(tb, "koala-slurm/submitit/malleable-sweep.json"))
    array_jobs = {job.split("_")[0] for job in manifest.values()}
    print(f"koala --quick on {SITE}'s login node: local {local_s:.1f} s, "
          f"slurm {slurm_s:.1f} s ({len(manifest)} array tasks)")
    assert len(manifest) == 8 and len(array_jobs) == 1  # one array of 8 tasks
    array_job = array_jobs.pop()

    def accounted() -> list[str]:
        return tb.exec(SITE, ["sacct", "--noheader", "--parsable2", "--allocations",
                              "--jobs", array_job, "--format=User,State"],
                       check=True).stdout.split()

    # submitit has every result as soon as the tasks wrote them; slurmctld sends the tasks'
    # ends to slurmdbd a moment later (CI saw the check run 2 s after the last end, and fail)
    wait_for(lambda: accounted() == ["alice|COMPLETED"] * 8, 60,
             "sacct to show the 8 array tasks COMPLETED", interval=1,
             explain=lambda: " ".join(accounted()))
    assert (_summary(_read(tb, "koala-slurm/summary.json"))
            == _summary(_read(tb, "koala-local/summary.json")))
    for name in FILES[1:]:  # summary.json differs in "out" only
        assert _read(tb, f"koala-slurm/{name}") == _read(tb, f"koala-local/{name}"), name

    assert main(["experiment", "koala", "--quick", "--out", str(tmp_path), "--json"]) == 0
    host = (tmp_path / "summary.json").read_bytes()
    assert _summary(_read(tb, "koala-slurm/summary.json")) == _summary(host)
    assert _read(tb, "koala-slurm/report.md") == (tmp_path / "report.md").read_bytes()

    # a second session with --resume submits nothing: every task's result is reused
    _koala(tb, "koala-slurm", "--executor", "slurm", "--runs-per-task", "3", "--resume")
    again = json.loads(_read(tb, "koala-slurm/submitit/malleable-sweep.json"))
    assert again == manifest
