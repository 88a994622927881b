"""The facts every Slurm version's output must show through the adapter's parsers (the
scenario of tests/integration/test_slurm_versions.py; recorded in tests/data/slurm/V/)."""

from __future__ import annotations

from malleable.adapters.slurm.parse import (
    parse_sacct,
    parse_scontrol_jobs,
    parse_sinfo_json,
    parse_squeue_json,
    parse_version,
    pick_job,
    state_word,
)
from malleable.model import JobState


def check_outputs(out: dict[str, str]) -> str:
    """The facts every version must show through the parsers; returns the version."""
    version = parse_version(out["version.txt"])
    grow, helper, other, waiting = (int(i) for i in out["ids.txt"].split(","))
    idle = parse_sinfo_json(out["sinfo_idle.json"])
    assert sorted(n.name for n in idle) == [f"uva-n00{i}" for i in range(1, 5)]
    assert all(n.idle and n.in_service for n in idle)
    busy = {n.name: n for n in parse_sinfo_json(out["sinfo_busy.json"])}
    assert sum(n.idle for n in busy.values()) == 1 and all(n.in_service for n in busy.values())
    jobs = {j.job_id: j for j in parse_squeue_json(out["squeue.json"])}
    assert (jobs[grow].state, jobs[grow].nodes, jobs[grow].user) == (
        JobState.RUNNING, 2, "malleable")
    assert (jobs[other].state, jobs[other].nodes, jobs[other].user) == (
        JobState.RUNNING, 1, "alice")
    assert (jobs[waiting].state, jobs[waiting].user) == (JobState.PENDING, "bob")
    assert jobs[grow].start_time is not None and jobs[grow].name == "grow"
    shown = {j.job_id: j for j in parse_scontrol_jobs(out["scontrol.txt"])}
    assert (shown[grow].state, shown[grow].nodes) == (JobState.RUNNING, 2)
    assert shown[waiting].state is JobState.PENDING
    check_reader(out, grow, helper)
    acct = {j.job_id: j for j in parse_sacct(out["sacct.txt"])}
    assert (acct[grow].state, acct[grow].nodes) == (JobState.RUNNING, 2)
    assert acct[other].state is JobState.RUNNING and acct[waiting].state is JobState.PENDING
    assert helper in acct
    return version


def check_reader(out: dict[str, str], grow: int, helper: int) -> None:
    """The MPI runner's reader (``job_argv``, ``pick_job``): the running job with its batch
    host, the ended helper still listed, a job Slurm never had taken as gone."""
    job = pick_job(out["squeue_grow.json"], grow)
    assert job is not None and state_word(job.state_raw) == "RUNNING"
    assert job.batch_host.startswith("uva-n") and job.nodes == 2 and job.stdout == "/dev/null"
    ended = pick_job(out["squeue_helper.json"], helper)
    assert ended is not None and state_word(ended.state_raw) in ("COMPLETED", "CANCELLED")
    rc, _, text = out["squeue_unknown.txt"].partition("\n")
    assert ("Invalid job id" in text) if rc != "rc=0" else pick_job(text, 999999) is None
