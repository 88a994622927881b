"""Ordinary users on the testbed: shared /home per site, accounting associations, the service
account as Slurm operator, declared node memory (what submitit and dask-jobqueue need)."""

from __future__ import annotations

import re

import pytest

from malleable.cli import main
from malleable.testbed import SMALL, Testbed
from malleable.testbed.accounts import UIDS, USERS
from tests.fakes.waits import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]


def _sacct(tb: Testbed, site: str, job: str, fields: str) -> list[str]:
    out = tb.exec(site, ["sacct", "--noheader", "--parsable2", "--allocations", "--jobs", job,
                         f"--format={fields}"], timeout=30, check=True).stdout.strip()
    return out.split("|") if out else []


def _wait_completed(tb: Testbed, site: str, job: str) -> None:
    wait_for(lambda: _sacct(tb, site, job, "State")[:1] == ["COMPLETED"], 90,
             f"job {job} on {site} to complete (sacct)")


def test_users_have_the_same_uids_on_every_container(small_testbed: Testbed) -> None:
    hosts = [h for s in SMALL.sites for h in (s.controller, *s.compute_hosts())]
    for host in hosts:
        for user, uid in UIDS.items():
            out = small_testbed.exec(host, ["id", "-u", user], check=True).stdout.strip()
            assert out == str(uid), (host, user)


def test_alice_submits_and_her_job_runs_as_alice_with_a_shared_home(
        small_testbed: Testbed) -> None:
    site = "uva"
    tb = small_testbed
    tb.exec(site, ["sh", "-c", "echo from-login > note.txt"], user="alice", check=True)
    nodes = ",".join(names[0] for names in SMALL.site(site).layout().values())
    job = tb.exec(site, ["sbatch", "--parsable", "--nodes=2", f"--nodelist={nodes}",
                         "--output=job-%j.out", "--wrap",
                         "id -un; cat note.txt; srun hostname; hostname > node-$SLURM_JOB_ID"],
                  user="alice", timeout=30, check=True).stdout.strip()
    _wait_completed(tb, site, job)
    assert _sacct(tb, site, job, "User,Account") == ["alice", "users"]
    # written on a compute node, read on the login node (and the other way round: note.txt)
    out = tb.exec(site, ["cat", f"job-{job}.out"], user="alice", check=True).stdout.split()
    assert out[:2] == ["alice", "from-login"]
    assert sorted(out[2:]) == ["uva-c0", "uva-c1"]
    batch_host = tb.exec(site, ["cat", f"node-{job}"], user="alice", check=True).stdout.strip()
    assert batch_host in ("uva-c0", "uva-c1")
    owner = tb.exec(batch_host, ["stat", "--format=%U %a", f"/home/alice/job-{job}.out"],
                    check=True).stdout.split()
    assert owner[0] == "alice"
    # homes are private to their users
    peek = tb.exec(site, ["ls", "/home/alice"], user="bob")
    assert not peek.ok and "Permission denied" in peek.stderr


def test_the_homes_of_two_sites_are_different_volumes(small_testbed: Testbed) -> None:
    small_testbed.exec("vu", ["touch", "only-on-vu"], user="carol", check=True)
    assert small_testbed.exec("vu-c1", ["test", "-f", "/home/carol/only-on-vu"]).ok
    assert not small_testbed.exec("uva-c0", ["test", "-f", "/home/carol/only-on-vu"]).ok


def test_the_service_account_is_an_operator_and_users_have_associations(
        small_testbed: Testbed) -> None:
    shown = small_testbed.exec("vu", ["sacctmgr", "show", "user", "malleable"],
                               check=True).stdout
    assert re.search(r"malleable\s+users\s+Operator", shown), shown
    assoc = small_testbed.exec("vu", ["sacctmgr", "--noheader", "--parsable2", "show", "assoc",
                                      "format=Cluster,Account,User"], check=True).stdout.split()
    for site in ("vu", "uva"):
        for user in (*USERS, "malleable"):
            assert f"{site}|users|{user}" in assoc


def test_the_operator_may_cancel_another_users_job(small_testbed: Testbed) -> None:
    job = small_testbed.exec("vu", ["sbatch", "--parsable", "--wrap", "sleep 300"],
                             user="bob", check=True).stdout.strip()
    small_testbed.exec("vu", ["scancel", job], user="malleable", check=True)
    wait_for(lambda: _sacct(small_testbed, "vu", job, "State")[:1] == ["CANCELLED by 2000"],
             60, f"bob's job {job} cancelled by the operator")
    denied = small_testbed.exec("vu", ["sbatch", "--parsable", "--wrap", "sleep 300"],
                                user="carol", check=True).stdout.strip()
    refused = small_testbed.exec("vu", ["scancel", denied], user="alice")
    assert not refused.ok and "Access/permission denied" in refused.stderr
    small_testbed.exec("vu", ["scancel", denied], check=True)


def test_nodes_declare_memory_so_mem_requests_run(small_testbed: Testbed) -> None:
    mem = small_testbed.exec("vu", ["sinfo", "--noheader", "--Node", "--format=%m"],
                             check=True).stdout.split()
    assert set(mem) == {"4000"}
    job = small_testbed.exec("vu", ["sbatch", "--parsable", "--mem=1G", "--wrap", "true"],
                             user="alice", check=True).stdout.strip()
    _wait_completed(small_testbed, "vu", job)
    too_much = small_testbed.exec("vu", ["sbatch", "--parsable", "--mem=5G", "--wrap", "true"],
                                  user="alice")
    assert not too_much.ok


def test_cli_exec_as_an_ordinary_user(small_testbed: Testbed, monkeypatch: pytest.MonkeyPatch,
                                      capfd: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("MALLEABLE_TESTBED_STATE", str(small_testbed.state.path.parent))
    assert main(["testbed", "exec", "--name", small_testbed.name, "--user", "bob", "vu", "--",
                 "sh", "-c", "id -un; pwd"]) == 0
    assert capfd.readouterr().out.split() == ["bob", "/home/bob"]
