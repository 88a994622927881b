"""slurm.conf and slurmdbd.conf generated from the templates in testbed/slurm/."""

from __future__ import annotations

import re

from malleable.testbed import images
from malleable.testbed.slurmconf import (
    SCHEDULER_PARAMETERS,
    node_lines,
    render_slurm_conf,
    render_slurmdbd_conf,
)
from malleable.testbed.topology import DAS3, Site


def _conf(site: Site) -> dict[str, str]:
    text = render_slurm_conf((images.testbed_dir() / "slurm" / "slurm.conf.in").read_text(), site)
    out = {}
    for line in text.splitlines():
        if line and not line.startswith("#") and not line.startswith(("NodeName=", "Partition")):
            key, _, value = line.partition("=")
            out[key] = value
    return out


def test_slurm_conf_names_the_cluster_and_its_controller() -> None:
    conf = _conf(Site("delft", 68))
    assert conf["ClusterName"] == "delft"
    assert conf["SlurmctldHost"] == "delft-ctl"
    assert conf["AccountingStorageType"] == "accounting_storage/slurmdbd"
    assert conf["AccountingStorageHost"] == "slurmdbd"


def test_scheduler_reacts_fast_and_permits_expansion() -> None:
    conf = _conf(Site("vu", 4))
    assert conf["SchedulerParameters"] == SCHEDULER_PARAMETERS
    params = conf["SchedulerParameters"].split(",")
    assert "permit_job_expansion" in params
    assert {"batch_sched_delay=0", "sched_min_interval=0", "sched_interval=5"} <= set(params)
    assert not any(p.startswith("defer") for p in params)


def test_one_node_is_the_allocation_unit() -> None:
    conf = _conf(Site("vu", 4))
    assert conf["SelectType"] == "select/linear"
    assert "%n" in conf["SlurmdSpoolDir"] and "%n" in conf["SlurmdPidFile"]


def test_every_node_has_its_own_port_within_its_container() -> None:
    for site in DAS3.sites:
        lines = node_lines(site)
        assert len(lines) == site.nodes
        seen: set[tuple[str, str]] = set()
        for line in lines:
            host = re.search(r"NodeAddr=(\S+)", line)
            port = re.search(r"Port=(\d+)", line)
            assert host and port
            assert (host.group(1), port.group(1)) not in seen
            seen.add((host.group(1), port.group(1)))
        assert {h for h, _ in seen} == set(site.compute_hosts())


def test_node_lines_follow_the_layout() -> None:
    rest = "CPUs=1 RealMemory=4000 State=UNKNOWN"
    assert node_lines(Site("vu", 3, 2)) == [
        f"NodeName=vu-n001 NodeHostname=vu-c0 NodeAddr=vu-c0 Port=17001 {rest}",
        f"NodeName=vu-n002 NodeHostname=vu-c0 NodeAddr=vu-c0 Port=17002 {rest}",
        f"NodeName=vu-n003 NodeHostname=vu-c1 NodeAddr=vu-c1 Port=17001 {rest}",
    ]


def test_no_placeholder_is_left() -> None:
    text = render_slurm_conf((images.testbed_dir() / "slurm" / "slurm.conf.in").read_text(),
                             Site("vu", 4))
    assert "${" not in text
    dbd_template = (images.testbed_dir() / "slurm" / "slurmdbd.conf.in").read_text()
    dbd = render_slurmdbd_conf(dbd_template, "pw")
    assert "StoragePass=pw" in dbd.splitlines() and "DbdHost=slurmdbd" in dbd.splitlines()
    assert "${" not in dbd
