"""The one Slurm "does this job hold nodes" predicate, and its two users.

Before it, the adapter (``adapters/slurm/cluster.py``) and CooRM's real views
(``coorm/real.py``) each had a copy: both took RUNNING, CONFIGURING and SUSPENDED;
only CooRM's took COMPLETING. The shared predicate takes COMPLETING (the epilog still
runs on the nodes); the adapter's view leaves completing jobs out of its running jobs
on purpose (the policy must not count or resize a job that has ended).
"""

from __future__ import annotations

import pytest

from malleable.adapters.slurm.cluster import SlurmCluster
from malleable.adapters.slurm.ctl import Poll, SlurmCtl
from malleable.adapters.slurm.parse import (
    HOLDING_STATES,
    JOB_STATES,
    SlurmJob,
    SlurmNode,
    holds_nodes,
)
from malleable.adapters.slurm.payload import Payload
from malleable.clock import ScaledClock
from malleable.coorm.policy import Busy
from malleable.coorm.real import busy_from_poll
from malleable.model import JobState
from tests.unit.test_slurm_fake import FakeSlurm, node_names

EPOCH = 1_700_000_000.0


def _job(state: str, nodes: int = 2) -> SlurmJob:
    return SlurmJob(7, "j", state, nodes, start_time=EPOCH - 100, end_time=EPOCH + 500)


@pytest.mark.parametrize(("raw", "holds"), [
    ("CONFIGURING", True), ("RUNNING", True), ("SUSPENDED", True), ("COMPLETING", True),
    ("running", True), (" RUNNING ", True),
    ("PENDING", False), ("REQUEUED", False), ("REQUEUE_HOLD", False),
    ("RESIZING", False), ("STOPPED", False), ("SIGNALING", False), ("STAGE_OUT", False),
    ("COMPLETED", False), ("CANCELLED by 0", False), ("FAILED", False), ("TIMEOUT", False),
    ("NODE_FAIL", False), ("PREEMPTED", False), ("WEIRD_NEW_STATE", False), ("", False),
])
def test_the_states_that_hold_nodes(raw: str, holds: bool) -> None:
    assert holds_nodes(_job(raw)) is holds


@pytest.mark.parametrize("raw", sorted(HOLDING_STATES))
def test_no_nodes_holds_nothing(raw: str) -> None:
    assert not holds_nodes(_job(raw, nodes=0))


def test_every_holding_state_is_a_running_state() -> None:
    assert all(JOB_STATES[s] is JobState.RUNNING for s in HOLDING_STATES)


def test_completing_is_the_base_state_only() -> None:
    assert _job("COMPLETING").completing and not _job("RUNNING").completing
    assert not _job("COMPLETED").completing


def test_coorm_counts_a_completing_job_until_its_end() -> None:
    nodes = tuple(SlurmNode(f"n{k}", "ALLOCATED") for k in range(2))
    busy = busy_from_poll("vu", Poll((_job("COMPLETING"),), nodes), 0.0, EPOCH)
    assert busy == [Busy("vu", 2, 500.0)]


def test_the_adapter_leaves_a_completing_job_out_of_its_running_jobs() -> None:
    fake = FakeSlurm(node_names(4))
    clock = ScaledClock(float(fake.now), 1.0, wall=lambda: float(fake.now))
    cluster = SlurmCluster("vu", SlurmCtl(fake), clock, "r1", Payload(0.01))
    job = fake.add_job(3, name="local-user")
    assert [j.size for j in cluster.observe().running.values()] == [3]
    job.state = "COMPLETING"
    cluster.refresh()
    assert cluster.observe().running == {}
