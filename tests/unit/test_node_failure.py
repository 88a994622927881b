"""Dead nodes under running jobs: host lists, which nodes a shrink keeps, and the
adapter shedding dead nodes (on the fake Slurm site of tests/fakes/slurm.py)."""

from __future__ import annotations

import pytest

from malleable.adapters.slurm import hostlist
from malleable.adapters.slurm.cluster import SlurmCluster
from malleable.adapters.slurm.ctl import SlurmCtl
from malleable.adapters.slurm.parse import SlurmJob, parse_scontrol_jobs, parse_sinfo_json
from malleable.adapters.slurm.payload import Payload
from malleable.adapters.slurm.resize import Outcome, Resizer, keep_nodes
from malleable.clock import ScaledClock
from malleable.model import JobKind, JobSpec, JobState, SizeRule
from tests.fakes.slurm import FakeSlurm, node_names


@pytest.mark.parametrize(("text", "names"), [
    ("vu-n[001-003]", ["vu-n001", "vu-n002", "vu-n003"]),
    ("vu-n[001-002,007],uva-n1", ["vu-n001", "vu-n002", "vu-n007", "uva-n1"]),
    ("n[8-10]", ["n8", "n9", "n10"]),
    ("a[1-2]b", ["a1b", "a2b"]),
    ("node1,node2", ["node1", "node2"]),
    ("", []),
])
def test_hostlist_expands_what_slurm_prints(text: str, names: list[str]) -> None:
    assert hostlist.expand(text) == names


@pytest.mark.parametrize("text", ["n[3-1]", "n[1-x]", "n[1-2", "n[1]]"])
def test_hostlist_refuses_what_slurm_never_prints(text: str) -> None:
    with pytest.raises(hostlist.HostlistError):
        hostlist.expand(text)


def test_hostlist_refuses_a_list_of_more_nodes_than_it_bounds_before_expanding_it() -> None:
    import tracemalloc

    assert len(hostlist.expand(f"n[1-{hostlist.MAX_NAMES}]")) == hostlist.MAX_NAMES
    tracemalloc.start()
    try:
        for text in (f"n[1-{hostlist.MAX_NAMES}],extra",
                     ",".join(f"n[1-{hostlist.MAX_NAMES // 2}]" for _ in range(3)),
                     f"n[0-{10**15}]"):
            with pytest.raises(hostlist.HostlistError, match="more than 65,536 nodes"):
                hostlist.expand(text)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 64 * 2**20  # refused before 10**15 names are made, not after


def _job(nodes: str, batch: str) -> SlurmJob:
    return SlurmJob(7, "m", "RUNNING", len(hostlist.expand(nodes)), nodes, batch_host=batch)


def test_a_shrink_releases_dead_nodes_first_and_keeps_the_batch_host() -> None:
    job = _job("n[001-006]", "n001")
    assert keep_nodes(job, 3, {"n002", "n005"}) == ["n001", "n003", "n004"]
    assert keep_nodes(job, 5, {"n002", "n005"}) == ["n001", "n003", "n004", "n006", "n002"]
    assert keep_nodes(job, 3, set()) is None  # nothing dead: NumNodes= does
    assert keep_nodes(job, 3, {"x9"}) is None
    assert keep_nodes(_job("n[001-004]", "n003"), 2, {"n001"}) == ["n003", "n002"]


def test_scontrol_and_sinfo_report_batch_host_and_dead_nodes() -> None:
    line = ("JobId=5 JobName=x UserId=a(1) JobState=RUNNING Reason=None NodeList=n[1-2] "
            "BatchHost=n1 NumNodes=2")
    assert parse_scontrol_jobs(line)[0].batch_host == "n1"
    nodes = parse_sinfo_json('{"nodes": [{"name": "a", "state": "allocated", '
                             '"state_flags": ["NOT_RESPONDING"]}, {"name": "b", "state": '
                             '"down"}, {"name": "c", "state": "idle", "state_flags": '
                             '["DRAIN"]}]}')
    assert [n.dead for n in nodes] == [True, True, False]


def _site(nodes: int = 8) -> tuple[FakeSlurm, SlurmCluster]:
    fake = FakeSlurm(node_names(nodes))
    clock = ScaledClock(float(fake.now), 1.0, wall=lambda: float(fake.now))
    resizer = Resizer(SlurmCtl(fake), run_tag="r1", sleep=lambda s: None)
    return fake, SlurmCluster("vu", SlurmCtl(fake), clock, "r1", Payload(0.01),
                              resizer=resizer)


def _spec(low: int = 2, high: int = 8, kind: JobKind = JobKind.MALLEABLE,
          rule: SizeRule = SizeRule.ANY) -> JobSpec:
    return JobSpec("j1", kind, low, high, low, app="gadget2", size_rule=rule)


def test_a_dead_node_is_shed_at_the_next_poll_and_reported() -> None:
    fake, cluster = _site()
    cluster.start(_spec(), 6)
    cluster.drain_events()
    job = next(iter(fake.jobs.values()))
    fake.dead = {job.nodes[2], job.nodes[4]}
    cluster.refresh()
    assert job.nodes == ["n001", "n002", "n004", "n006"]
    assert ["scontrol", "update", f"JobId={job.job_id}", "NodeList=n001,n002,n004,n006"
            ] in fake.calls
    assert [(e.state, e.size) for e in cluster.drain_events()] == [(JobState.RUNNING, 4)]
    (entry,) = cluster.node_failures
    assert entry["action"] == "shed" and entry["outcome"] == "done"
    assert entry["dead"] == "n003,n005" and entry["after"] == 4
    assert cluster.observe().running["j1"].size == 4  # a new poll, not the one before
    cluster.refresh()  # the same dead nodes are not acted on twice
    assert len(cluster.node_failures) == 1


def test_a_shrink_by_count_releases_the_dead_nodes_first() -> None:
    fake = FakeSlurm(node_names(6))
    resizer = Resizer(SlurmCtl(fake), sleep=lambda s: None)
    job = fake.add_job(5)
    result = resizer.resize(job.job_id, 3, avoid={"n002", "n009"})
    assert result.outcome is Outcome.DONE and job.nodes == ["n001", "n003", "n004"]
    result = resizer.resize(job.job_id, 2)  # nothing to avoid: NumNodes= as before
    assert result.outcome is Outcome.DONE and job.nodes == ["n001", "n003"]
    assert ["scontrol", "update", f"JobId={job.job_id}", "NumNodes=2"] in fake.calls


def test_jobs_that_cannot_do_without_the_dead_node_are_left_to_slurm() -> None:
    fake, cluster = _site(4)
    cluster.start(JobSpec("j1", JobKind.RIGID, 2, 2, 2, app="gadget2"), 2)
    cluster.start(JobSpec("j2", JobKind.MALLEABLE, 2, 2, 2, app="gadget2"), 2)
    cluster.drain_events()
    fake.dead = {"n001", "n004"}  # j1's batch host; j2 cannot go below 2
    cluster.refresh()
    reasons = {e["job"]: str(e["reason"]) for e in cluster.node_failures}
    assert "batch host" in reasons["j1"] and "fewer than 2" in reasons["j2"]
    assert all(e["action"] == "none" for e in cluster.node_failures)
    assert not any(c[:2] == ["scontrol", "update"] for c in fake.calls)


def test_a_job_with_a_size_rule_sheds_down_to_an_accepted_size() -> None:
    fake, cluster = _site()
    cluster.start(_spec(low=1, rule=SizeRule.POW2), 4)
    cluster.drain_events()
    job = next(iter(fake.jobs.values()))
    fake.dead = {job.nodes[1]}  # 4 -> 3 is no power of two: the job goes to 2
    cluster.refresh()
    assert job.nodes == ["n001", "n003"]
    assert cluster.node_failures[0]["after"] == 2
    result = cluster.resizes[-1]
    assert result.outcome is Outcome.DONE and result.after == 2
