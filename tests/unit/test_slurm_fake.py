"""The fake Slurm site of tests/fakes/slurm.py checks itself against Slurm's behaviour."""

from __future__ import annotations

from tests.fakes.slurm import FakeSlurm, job_number, node_names


def test_fake_allocates_whole_nodes_and_queues_the_rest() -> None:
    site = FakeSlurm(node_names(4))
    a = site.add_job(3)
    b = site.add_job(2)
    assert (a.state, len(a.nodes), b.state) == ("RUNNING", 3, "PENDING")
    site.finish(a.job_id)
    assert b.state == "RUNNING"
    line = site.run(["scontrol", "-o", "show", "job", str(b.job_id)], 5).stdout
    assert job_number(line) == b.job_id and "NumNodes=2" in line
