"""``malleable submit`` to an OAR testbed site, as alice over SSH (a clusters config with
``kind = "oar"``, her own key): the job waits in ``Hold``, owned by alice, named with the
compact tag, which parses back; a tag too long for OAR's job name is refused before
``oarsub`` (exit 2), which would refuse it with "verify your request syntax".

The held job is then resumed as ``oar`` (what the site service will do, docs/oar.md) and
runs alice's command. The service account ``malleable``, over SSH, can resume and delete
alice's job only through its sudo rule (``sudo -u oar oarresume|oardel``) and can run
nothing else as ``oar`` or anyone. Bounded by the test timeout; the module's testbed (one OAR site,
2 nodes in one container) is taken down after its last test, every job deleted after each.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from malleable.adapters.oar.ctl import OarCtl
from malleable.adapters.oar.parse import parse_oarstat
from malleable.adapters.slurm.sites import runner_for
from malleable.cli import main
from malleable.config import load_config
from malleable.errors import ExternalError
from malleable.model import JobState
from malleable.site import tag as tags
from malleable.site.oarjobs import discover
from malleable.testbed import Docker, Site, Testbed, Topology
from tests.fakes.accounts import user_config
from tests.fakes.waits import own_testbed, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

GRID = Topology("oar-submit", (Site("grid", 2, containers=1, kind="oar"),))


def _jobs(tb: Testbed, *ids: int) -> dict[int, dict[str, object]]:
    argv = ["oarstat", "-fJ", *(a for i in ids for a in ("-j", str(i)))] if ids \
        else ["oarstat", "-J"]
    out = tb.exec("grid", argv, check=True).stdout
    return {int(k): v for k, v in json.loads(out or "{}").items()}


@pytest.fixture(scope="module")
def oar(docker_engine: Docker, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Testbed]:
    yield from own_testbed("oarsubmit", GRID, tmp_path_factory.mktemp("oar-submit"),
                           docker_engine)


@pytest.fixture(scope="module")
def alice_config(oar: Testbed, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A clusters config that reaches grid's login node over SSH as alice, with a key
    made for this module (authorized in her home on the site)."""
    return user_config(oar, ["grid"], "alice", tmp_path_factory.mktemp("alice"))


@pytest.fixture
def clean(oar: Testbed) -> Iterator[None]:
    try:
        yield
    finally:
        live = list(_jobs(oar))
        if live:
            oar.exec("grid", ["oardel", *map(str, live)])
        wait_for(lambda: not _jobs(oar), 120, "the OAR queue empty after the test")


def test_alice_s_job_waits_held_named_with_the_tag_and_runs_once_resumed(
        oar: Testbed, alice_config: Path, clean: None,
        capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["submit", "--config", str(alice_config), "--site", "grid", "--min", "1",
                 "--max", "2", "--time", "10", "--app-model", "jacobi", "--",
                 "sh", "-c", 'echo "hi from $(hostname)"'])
    out = capsys.readouterr().out.strip()
    assert code == 0 and out.isdigit()
    job_id = int(out)
    doc = _jobs(oar, job_id)[job_id]
    assert (doc["state"], doc["owner"]) == ("Hold", "alice")
    tag = tags.parse_oar(str(doc["name"]))
    assert (tag.min_size, tag.max_size, tag.preferred, tag.app) == (1, 2, None, "jacobi")
    assert tag.sub is not None and re.fullmatch(r"[0-9a-f]{8}", tag.sub)
    (held,) = parse_oarstat(oar.exec("grid", ["oarstat", "-fJ", "-j", str(job_id)],
                                     check=True).stdout)
    assert held.walltime == 600.0  # --time 10 (minutes), read from W= of oarstat's message
    found = discover(parse_oarstat(oar.exec("grid", ["oarstat", "-J"], check=True).stdout),
                     "grid", "malleable").found
    assert found[job_id].job_id == f"alice:{tag.sub}" and found[job_id].held
    assert _jobs(oar, job_id)[job_id]["state"] == "Hold"
    # the service's step (docs/notes/issue-15-serve-design.md): oarresume as oar
    oar.exec("grid", ["su", "oar", "-s", "/bin/sh", "-c", f"oarresume {job_id}"], check=True)
    wait_for(lambda: _jobs(oar, job_id)[job_id]["state"] in ("Terminated", "Error"), 120,
             f"job {job_id} to run and end")
    done = _jobs(oar, job_id)[job_id]
    assert (done["state"], done["exit_code"]) == ("Terminated", 0)
    said = oar.exec("grid", ["cat", f"OAR.{job_id}.stdout"], user="alice", check=True).stdout
    assert said.strip() == "hi from grid-c0"


def test_a_tag_too_long_for_oar_is_refused_before_oarsub(
        oar: Testbed, alice_config: Path, clean: None,
        capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["submit", "--config", str(alice_config), "--site", "grid", "--min", "1",
                 "--max", "100000", "--preferred", "100000", "--app-model", "a" * 64, "--",
                 "true"])
    err = capsys.readouterr().err.strip()
    assert code == 2 and "\n" not in err
    assert "--app-model: the tag makes an OAR job name of 113 characters, over OAR's 100" in err
    assert _jobs(oar) == {}


def test_oar_itself_refuses_a_name_over_100_characters(oar: Testbed, alice_config: Path,
                                                       clean: None) -> None:
    """The fact the check above stands on (OAR 2.5.9's ``jobs.job_name`` is varchar(100))."""
    site = load_config(alice_config).site("grid")
    runner = runner_for(site)
    try:
        ctl = OarCtl(runner, site.command_timeout)
        (fits,) = ctl.submit(["--hold", "-n", "m1;" + "x" * 97, "-l", "nodes=1"], "true")
        assert _jobs(oar, fits)[fits]["owner"] == "alice"
        with pytest.raises(ExternalError, match="verify your request syntax"):
            ctl.submit(["--hold", "-n", "m1;" + "x" * 98, "-l", "nodes=1"], "true")
    finally:
        runner.close()
    assert list(_jobs(oar)) == [fits]


# ---------------------------------------------------------------- the service's sudo rule

def _as_service(oar: Testbed, tmp_path: Path, *argv: str) -> tuple[int, str]:
    """Run ``argv`` on grid's login node over SSH as the service account ``malleable``
    (the testbed's clusters config), as the site service will; exit code and output."""
    config = tmp_path / "service.toml"
    config.write_text(oar.config_toml())
    runner = runner_for(load_config(config).site("grid"))
    try:
        result = runner.run(list(argv), 60, check=False)
    finally:
        runner.close()
    return result.rc, result.stdout + result.stderr


def test_the_service_resumes_and_deletes_alice_s_job_as_oar_and_nothing_else(
        oar: Testbed, alice_config: Path, clean: None, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["submit", "--config", str(alice_config), "--site", "grid", "--min", "1",
                 "--max", "2", "--", "sleep", "600"]) == 0
    job = capsys.readouterr().out.strip()
    # without sudo, OAR refuses (only the owner, oar and root may)
    rc, said = _as_service(oar, tmp_path, "oarresume", job)
    assert "you are not the right user" in said
    assert _jobs(oar, int(job))[int(job)]["state"] == "Hold"
    # nothing but oarresume and oardel, and only as oar
    for argv in (["-u", "oar", "oarsub", "-l", "nodes=1", "true"], ["-u", "oar", "oarhold", job],
                 ["-u", "oar", "/bin/sh", "-c", "id"], ["-u", "oar", "/usr/lib/oar/oarresume", job],
                 ["-u", "root", "oarresume", job], ["-u", "alice", "oarresume", job]):
        rc, said = _as_service(oar, tmp_path, "sudo", "-n", *argv)
        assert rc != 0 and "a password is required" in said, argv
    rc, said = _as_service(oar, tmp_path, "sudo", "-n", "-l")
    assert rc == 0 and said.count("NOPASSWD") == 1
    assert "(oar) NOPASSWD: /usr/bin/oarresume, /usr/bin/oardel" in said
    assert _jobs(oar, int(job))[int(job)]["state"] == "Hold"
    # alice cannot use the rule
    assert not oar.exec("grid", ["sudo", "-n", "-u", "oar", "oarresume", job], user="alice").ok
    # the rule itself: resume the held job, then delete it (cancelled, as oardel leaves it)
    rc, said = _as_service(oar, tmp_path, "sudo", "-n", "-u", "oar", "oarresume", job)
    assert rc == 0 and "Resume request was sent" in said
    wait_for(lambda: _jobs(oar, int(job))[int(job)]["state"] == "Running", 120,
             f"alice's job {job} running after oarresume as oar")
    rc, said = _as_service(oar, tmp_path, "sudo", "-n", "-u", "oar", "oardel", job)
    assert rc == 0, said
    wait_for(lambda: _jobs(oar, int(job))[int(job)]["state"] == "Error", 120,
             f"alice's job {job} deleted by oardel as oar")
    (ended,) = parse_oarstat(oar.exec("grid", ["oarstat", "-fJ", "-j", job], check=True).stdout)
    assert ended.owner == "alice" and ended.events[:2] == ("RESUME_JOB", "FRAG_JOB_REQUEST")
    assert ended.state is JobState.CANCELLED
