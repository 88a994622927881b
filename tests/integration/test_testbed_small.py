"""The small testbed (2 sites x 4 nodes, 2 compute containers each) against real daemons."""

from __future__ import annotations

import json
import re
import tomllib
from pathlib import Path

import paramiko
import pytest

from malleable.cli import main
from malleable.testbed import SMALL, Testbed
from tests.fakes.waits import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

HELLO = ("from mpi4py import MPI; c = MPI.COMM_WORLD; "
         "print('rank', c.rank, 'of', c.size, 'on', MPI.Get_processor_name(), "
         "'sum', c.allreduce(c.rank + 1), flush=True)")


def _job_state(tb: Testbed, site: str, job: str) -> str:
    out = tb.exec(site, ["sacct", "--noheader", "--parsable2", "--allocations", "--jobs", job,
                         "--format=State"], timeout=30, check=True).stdout.split()
    return out[0] if out else ""


def test_small_testbed_is_up(small_testbed: Testbed) -> None:
    status = small_testbed.status()
    assert status.up, status
    assert set(status.sites) == {"vu", "uva"}
    for site in SMALL.sites:
        s = status.sites[site.name]
        assert s.controller_health == "healthy"
        assert s.node_states == {"idle": site.nodes} and s.jobs == 0
    hosts = {c.hostname for c in status.containers}
    assert hosts == {"slurmdbd", "vu-ctl", "vu-c0", "vu-c1", "uva-ctl", "uva-c0", "uva-c1"}


def test_each_site_is_its_own_cluster_in_shared_accounting(small_testbed: Testbed) -> None:
    for site in ("vu", "uva"):
        conf = small_testbed.exec(site, ["scontrol", "show", "config"], check=True).stdout
        assert re.search(rf"ClusterName\s+= {site}\b", conf)
        assert re.search(rf"SlurmctldHost\[0\]\s+= {site}-ctl\b", conf)
        assert "permit_job_expansion" in conf
    clusters = small_testbed.exec("vu", ["sacctmgr", "--noheader", "--parsable2", "list",
                                         "clusters", "format=Cluster"], check=True).stdout.split()
    assert sorted(clusters) == ["uva", "vu"]


@pytest.mark.parametrize("site", ["vu", "uva"])
def test_trivial_batch_job_completes_on_each_site(small_testbed: Testbed, site: str) -> None:
    job = small_testbed.exec(site, ["sbatch", "--parsable", "--nodes=2", "--output=hello-%j.out",
                                    "--wrap", "srun hostname"], user="malleable", timeout=30,
                             check=True).stdout.strip()
    wait_for(lambda: _job_state(small_testbed, site, job) == "COMPLETED", 60,
             f"job {job} on {site} to complete (sacct)")
    show = small_testbed.exec(site, ["scontrol", "-o", "show", "job", job], check=True).stdout
    first = re.search(r"BatchHost=(\S+)", show)
    assert first is not None
    out = small_testbed.exec(first.group(1), ["cat", f"hello-{job}.out"], user="malleable",
                             check=True).stdout.split()
    assert len(out) == 2 and all(h.startswith(f"{site}-c") for h in out)


def test_mpi_hello_across_the_two_compute_containers(small_testbed: Testbed) -> None:
    layout = SMALL.site("vu").layout()
    nodes = ",".join(names[0] for names in layout.values())  # one node in each container
    result = small_testbed.exec("vu", ["salloc", "--nodes=2", f"--nodelist={nodes}", "mpirun",
                                       "python3", "-c", HELLO], user="malleable", timeout=120)
    assert result.ok, result.stderr
    lines = sorted(line for line in result.stdout.splitlines() if line.startswith("rank"))
    assert lines == ["rank 0 of 2 on vu-c0 sum 3", "rank 1 of 2 on vu-c1 sum 3"]


def _ssh(host: str, port: int, key: str, known_hosts: str) -> paramiko.SSHClient:
    client = paramiko.SSHClient()
    client.load_host_keys(known_hosts)
    client.set_missing_host_key_policy(paramiko.RejectPolicy())
    client.connect(host, port=port, username="malleable", key_filename=key,
                   look_for_keys=False, allow_agent=False, timeout=20)
    return client


def test_ssh_to_each_site_with_the_generated_keys(small_testbed: Testbed) -> None:
    config = tomllib.loads(small_testbed.config_toml())["clusters"]
    assert set(config) == {"vu", "uva"}
    for site, c in config.items():
        assert c["slurm_cluster"] == site and c["user"] == "malleable"
        for host, port in ((c["host"], c["port"]), (c["address"], 22)):
            client = _ssh(host, port, c["key"], c["known_hosts"])
            try:
                _, out, _ = client.exec_command("hostname; sinfo --noheader --format=%D",
                                                timeout=30)
                assert out.read().decode().split() == [f"{site}-ctl", str(c["nodes"])]
            finally:
                client.close()


def test_host_keys_are_checked(small_testbed: Testbed, tmp_path: Path) -> None:
    ep = small_testbed.endpoints()["vu"]
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    with pytest.raises(paramiko.SSHException, match="not found in known_hosts"):
        _ssh(ep.host, ep.port, ep.key, str(empty))


def test_ssh_between_containers_checks_host_keys(small_testbed: Testbed) -> None:
    result = small_testbed.exec("vu-c0", ["ssh", "-o", "BatchMode=yes", "-o",
                                          "StrictHostKeyChecking=yes", "vu-n004", "hostname"],
                                user="malleable", timeout=30)
    assert result.ok, result.stderr
    assert result.stdout.strip() == "vu-c1"


def test_cli_status_json_and_exec(small_testbed: Testbed, monkeypatch: pytest.MonkeyPatch,
                                  capfd: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("MALLEABLE_TESTBED_STATE", str(small_testbed.state.path.parent))
    assert main(["testbed", "status", "--name", small_testbed.name, "--json"]) == 0
    doc = json.loads(capfd.readouterr().out)
    assert doc["sites"]["vu"]["idle"] == 4 and doc["sites"]["uva"]["idle"] == 4
    assert doc["up"] is True
    assert main(["testbed", "exec", "--name", small_testbed.name, "uva", "--", "sinfo",
                 "--noheader", "--format=%D %T"]) == 0
    assert capfd.readouterr().out.split() == ["4", "idle"]
    assert main(["testbed", "config", "--name", small_testbed.name]) == 0
    assert "[clusters.uva]" in capfd.readouterr().out
