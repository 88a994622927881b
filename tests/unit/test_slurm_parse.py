"""Parsers against output recorded from the testbed's Slurm 22.05.8 (tests/data/slurm/).

The recorded queue holds what resizing leaves behind: a job that failed to launch, a
job shrunk and expanded (flag JOB_RESIZED), and two helper allocations given away
with NumNodes=0 (COMPLETED, node_count 1 but no nodes).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from malleable.adapters.slurm.parse import (
    JOB_STATES,
    ParseError,
    SlurmJob,
    job_argv,
    map_state,
    parse_sacct,
    parse_salloc,
    parse_sbatch,
    parse_scontrol_jobs,
    parse_scontrol_pairs,
    parse_sinfo_json,
    parse_squeue_json,
    pick_job,
    run_seconds,
    state_word,
)
from malleable.model import JobState

DATA = Path(__file__).resolve().parents[1] / "data" / "slurm"


def _read(name: str) -> str:
    return (DATA / name).read_text()


def test_squeue_json_recorded() -> None:
    jobs = {j.job_id: j for j in parse_squeue_json(_read("squeue_after_resizes.json"))}
    assert sorted(jobs) == [1, 2, 3, 4]
    failed, resized, helper = jobs[1], jobs[2], jobs[3]
    assert (failed.state, failed.nodes, failed.node_list, failed.reason) == (
        JobState.FAILED, 4, "vu-n[001-004]", "JobLaunchFailure")
    assert (resized.state, resized.state_raw, resized.nodes, resized.node_list) == (
        JobState.CANCELLED, "CANCELLED", 3, "vu-n[001-003]")
    assert (resized.submit_time, resized.start_time, resized.end_time) == (
        1795328661.0, 1795328662.0, 1795328666.0)
    assert (resized.user, resized.partition, resized.name) == ("malleable", "batch", "wrap")
    assert (helper.state, helper.nodes, helper.node_list) == (JobState.COMPLETED, 1, "")


def test_sinfo_json_recorded() -> None:
    nodes = parse_sinfo_json(_read("sinfo_4_idle.json"))
    assert [n.name for n in nodes] == ["vu-n001", "vu-n002", "vu-n003", "vu-n004"]
    assert all(n.idle and n.in_service and n.partitions == ("batch",) for n in nodes)


def test_scontrol_recorded() -> None:
    jobs = {j.job_id: j for j in parse_scontrol_jobs(_read("scontrol_after_resizes.txt"))}
    assert sorted(jobs) == [1, 2, 3, 4]
    assert (jobs[2].nodes, jobs[2].node_list, jobs[2].state) == (3, "vu-n[001-003]",
                                                                 JobState.CANCELLED)
    assert (jobs[3].nodes, jobs[3].node_list, jobs[3].user) == (1, "", "malleable")
    assert jobs[1].reason == "JobLaunchFailure"


def test_sacct_recorded_keeps_the_current_row_of_a_resized_job() -> None:
    jobs = {j.job_id: j for j in parse_sacct(_read("sacct_resizes.txt"))}
    assert sorted(jobs) == [1, 2, 3, 4]
    assert (jobs[2].state_raw, jobs[2].state, jobs[2].nodes) == (
        "CANCELLED by 2000", JobState.CANCELLED, 3)
    assert (jobs[2].start_time, jobs[2].end_time) == (1795328665.0, 1795328666.0)
    assert jobs[1].state is JobState.FAILED
    assert jobs[3].state is JobState.RUNNING  # only RESIZING rows: not taken for finished


@pytest.mark.parametrize(("raw", "state"), [
    ("RUNNING", JobState.RUNNING), ("PENDING", JobState.PENDING),
    ("COMPLETED", JobState.COMPLETED), ("CANCELLED by 2000", JobState.CANCELLED),
    ("TIMEOUT", JobState.TIMEOUT), ("NODE_FAIL", JobState.FAILED),
    ("OUT_OF_MEMORY", JobState.FAILED), ("COMPLETING", JobState.RUNNING),
    ("RESIZING", JobState.RUNNING), ("WEIRD_NEW_STATE", JobState.UNKNOWN), ("", JobState.UNKNOWN),
])
def test_state_table_with_unknown_default(raw: str, state: JobState) -> None:
    assert map_state(raw) is state


def test_unknown_is_never_finished() -> None:
    assert not JobState.UNKNOWN.finished
    assert all(isinstance(v, JobState) for v in JOB_STATES.values())


def test_later_json_layouts_are_read_too() -> None:
    text = json.dumps({"errors": [], "jobs": [{
        "job_id": 7, "name": "x", "job_state": ["RUNNING", "RESIZING"],
        "node_count": {"set": True, "infinite": False, "number": 3}, "nodes": "n[1-3]",
        "start_time": {"set": True, "number": 100}, "end_time": {"set": False, "number": 0},
        "comment": "c"}]})
    job = parse_squeue_json(text)[0]
    assert (job.state, job.nodes, job.start_time, job.end_time) == (JobState.RUNNING, 3,
                                                                    100.0, None)
    nodes = parse_sinfo_json(json.dumps({"errors": [], "nodes": [
        {"name": "a", "state": ["IDLE", "DRAIN"]}, {"name": "b", "state": ["MIXED"]},
        {"name": "c", "state": "idle", "state_flags": ["NOT_RESPONDING"]},
        {"name": "d", "state": "down"}, {"name": "e", "state": ["DRAIN", "IDLE"]}]}))
    by = {n.name: n for n in nodes}
    assert not by["a"].idle and not by["a"].in_service
    assert by["b"].in_service and not by["b"].idle
    assert not by["c"].idle and not by["c"].in_service
    assert not by["d"].in_service
    assert not by["e"].idle and by["e"].state == "IDLE"


@pytest.mark.parametrize("text", ["not json", "[]", '{"errors": ["boom"], "jobs": []}',
                                  '{"errors": []}', '{"errors": [], "jobs": [{"name": "x"}]}'])
def test_bad_squeue_output(text: str) -> None:
    with pytest.raises(ParseError):
        parse_squeue_json(text)


def test_scontrol_pairs_keep_equals_and_spaces_in_values() -> None:
    pairs = parse_scontrol_pairs("JobId=5 TRES=cpu=2,node=2 Comment=a b c NumNodes=2-4 Power=")
    assert pairs["TRES"] == "cpu=2,node=2"
    assert pairs["Comment"] == "a b c"
    assert pairs["Power"] == ""
    job = parse_scontrol_jobs("JobId=5 JobState=RUNNING NumNodes=2-4 NodeList=(null)\n")[0]
    assert (job.nodes, job.node_list) == (2, "")
    with pytest.raises(ParseError):
        parse_scontrol_jobs("Nothing=here\n")


def test_sbatch_and_salloc_messages() -> None:
    assert parse_sbatch("123\n") == 123
    assert parse_sbatch("124;vu\n") == 124
    with pytest.raises(ParseError):
        parse_sbatch("")
    assert parse_salloc(_read("salloc_granted.stderr")) == (5, True)
    assert parse_salloc(_read("salloc_refused_busy.stderr")) == (6, False)
    assert parse_salloc(_read("salloc_refused_too_many.stderr")) == (7, False)
    assert parse_salloc("salloc: error: Job submit/allocate failed: Requested node "
                        "configuration is not available\n") == (None, False)


# ----------------------------------------------------------------------------- one job


def test_state_word_is_the_word_scontrol_shows() -> None:
    """22.05's JSON (and scontrol) give one word; later releases list the base state and
    its flags, of which Slurm shows the first of its own order."""
    assert state_word("RUNNING") == "RUNNING"
    assert state_word("COMPLETED COMPLETING") == "COMPLETING"
    assert state_word("RUNNING CONFIGURING") == "CONFIGURING"
    assert state_word("PENDING REQUEUED") == "REQUEUED"
    assert state_word("CANCELLED") == "CANCELLED" and state_word("") == ""


@pytest.mark.parametrize("version", ["22.05", "24.11", "26.05"])
def test_pick_job_reads_one_job_of_recorded_squeue_json(version: str) -> None:
    text = (DATA / version / "squeue.json").read_text()
    job = pick_job(text, 1)
    assert job is not None and state_word(job.state_raw) == "RUNNING"
    assert job.batch_host == "uva-n001" and job.stdout == "/dev/null" and job.nodes == 2
    assert pick_job(text, 999999) is None


def test_pick_job_takes_an_invalid_id_error_as_gone_and_refuses_other_errors() -> None:
    gone = json.dumps({"errors": [{"error": "Invalid job id specified", "error_number": 2017}],
                       "jobs": []})
    assert pick_job(gone, 5) is None
    with pytest.raises(ParseError, match="Slurm reported errors"):
        pick_job(json.dumps({"errors": [{"error": "Socket timed out"}], "jobs": []}), 5)
    with pytest.raises(ParseError, match="not JSON"):
        pick_job("slurm_load_jobs error", 5)


def test_job_argv_asks_for_every_state_and_the_job() -> None:
    assert job_argv(12) == ["squeue", "--json", "--states=all", "--jobs=12"]


def test_run_seconds_counts_to_the_end_or_now() -> None:
    job = SlurmJob(1, "x", "RUNNING", 1, start_time=100.0, end_time=10_000.0)
    assert run_seconds(job, 160.0) == 60.0
    assert run_seconds(SlurmJob(1, "x", "COMPLETED", 1, start_time=100.0, end_time=130.0),
                       500.0) == 30.0
    assert run_seconds(SlurmJob(1, "x", "PENDING", 1), 500.0) is None
