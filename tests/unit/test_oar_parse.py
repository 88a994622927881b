"""OAR parsers against output recorded on the testbed's OAR 2.5.9 (tests/data/oar/).

Recorded: a poll with two running jobs and one waiting (``oarstat -J``), the nodes
meanwhile (``oarnodes -J``), a job deleted while running (Error with
FRAG_JOB_REQUEST), one that ended by itself (Terminated, exit code 0), one killed at
its walltime (Error with WALLTIME and FRAG_JOB_REQUEST) and one that exited 3
(Terminated, exit code 768), and oarsub's answers to a job that fits and to one that
exceeds the platform; a job submitted ``--hold`` and deleted while held, and one resumed
(``oarresume``) then deleted while running, both by ``oar`` (the site service's sudo rule).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from malleable.adapters.oar.ctl import _submitted_ids
from malleable.adapters.oar.parse import (
    STATES,
    OarJob,
    ParseError,
    parse_oarnodes,
    parse_oarstat,
    parse_oarsub,
)
from malleable.model import JobState

DATA = Path(__file__).resolve().parents[1] / "data" / "oar"


def _read(name: str) -> str:
    return (DATA / name).read_text()


def test_oarstat_recorded_poll() -> None:
    jobs = {j.job_id: j for j in parse_oarstat(_read("oarstat-running-waiting.json"))}
    assert sorted(jobs) == [2, 3, 4]
    assert (jobs[2].state, jobs[2].nodes, jobs[2].owner) == (JobState.RUNNING, ("oar-n003",),
                                                            "malleable")
    assert jobs[2].holds_nodes and jobs[2].start_time and jobs[2].submitted
    assert (jobs[4].state, jobs[4].nodes, jobs[4].start_time) == (JobState.PENDING, (), None)
    assert not jobs[4].holds_nodes


def test_deleted_running_job_is_cancelled_not_failed() -> None:
    (job,) = parse_oarstat(_read("oarstat-full-deleted.json"))
    assert job.state_raw == "Error" and "FRAG_JOB_REQUEST" in job.events
    assert job.state is JobState.CANCELLED
    assert job.stop_time is not None and job.start_time is not None


@pytest.mark.parametrize("name", ["oarstat-full-held-deleted.json",
                                  "oarstat-full-resumed-deleted.json"])
def test_a_held_job_deleted_before_or_after_its_resume_is_cancelled(name: str) -> None:
    (job,) = parse_oarstat(_read(name))
    assert (job.state_raw, job.owner) == ("Error", "alice")
    assert job.state is JobState.CANCELLED, job.events


def test_the_resume_comes_first_in_a_resumed_job_s_events() -> None:
    (job,) = parse_oarstat(_read("oarstat-full-resumed-deleted.json"))
    assert job.events == ("RESUME_JOB", "FRAG_JOB_REQUEST", "SEND_KILL_JOB",
                          "SWITCH_INTO_ERROR_STATE")
    assert job.notes[0] == "RESUME_JOB: User oar launched oarresume on the job 1"


def test_a_job_oar_put_in_error_failed_even_if_deleted_afterwards() -> None:
    # Recorded: -O/-E in a directory that does not exist; bipbip errs the job at launch.
    text = _read("oarstat-full-output-files.json")
    (job,) = parse_oarstat(text)
    assert job.events == ("SWITCH_INTO_ERROR_STATE", "OUTPUT_FILES")
    assert job.state is JobState.FAILED
    assert any("OUTPUT_FILES: [bipbip 1] Cannot create .stdout" in n for n in job.notes)
    doc = json.loads(text)  # then an oardel of the dead job (a cleanup) adds a FRAG
    doc["1"]["events"].append({"type": "FRAG_JOB_REQUEST", "event_id": 3,
                               "description": "User malleable requested to frag the job 1"})
    (deleted,) = parse_oarstat(json.dumps(doc))
    assert deleted.events[-1] == "FRAG_JOB_REQUEST" and deleted.state is JobState.FAILED


def test_terminated_job_completed() -> None:
    (job,) = parse_oarstat(_read("oarstat-full-terminated.json"))
    assert (job.state, job.exit_code, job.nodes) == (JobState.COMPLETED, 0,
                                                     ("oar-n001", "oar-n002"))


def test_walltime_kill_is_a_timeout_and_a_non_zero_exit_a_failure() -> None:
    jobs = {j.job_id: j for j in parse_oarstat(_read("oarstat-full-walltime-exit3.json"))}
    assert jobs[5].state is JobState.TIMEOUT and "FRAG_JOB_REQUEST" in jobs[5].events
    assert (jobs[6].state_raw, jobs[6].exit_code, jobs[6].state) == ("Terminated", 768,
                                                                     JobState.FAILED)


def test_unknown_state_is_unknown_never_completed() -> None:
    job = OarJob(1, "", "u", "Vanished", (), None, None, None)
    assert job.state is JobState.UNKNOWN
    assert "Vanished" not in STATES


def test_oarnodes_recorded() -> None:
    nodes = parse_oarnodes(_read("oarnodes-busy.json"))
    assert [n.address for n in nodes] == ["oar-n001", "oar-n002", "oar-n003", "oar-n004"]
    assert all(n.usable for n in nodes)


def test_oarsub_answers() -> None:
    assert parse_oarsub(_read("oarsub-ok.txt")) == 4
    with pytest.raises(ParseError, match="not enough resources"):
        parse_oarsub(_read("oarsub-too-big.txt"))
    assert _submitted_ids(_read("oarsub-ok.txt") * 3) == [4, 4, 4]
    assert _submitted_ids(_read("oarsub-too-big.txt")) == []


@pytest.mark.parametrize("text", ["[", "[]", '{"1": 3}'])
def test_garbage_is_a_parse_error(text: str) -> None:
    with pytest.raises(ParseError):
        parse_oarstat(text)


def test_empty_output_is_no_jobs() -> None:
    assert parse_oarstat("") == [] and parse_oarnodes("  \n") == []


def test_the_resources_asked_come_from_the_message() -> None:
    jobs = {j.job_id: j for j in parse_oarstat(_read("oarstat-full-terminated.json"))}
    assert [j.resources for j in jobs.values()] == [2]  # recorded "R=2,W=0:5:0,J=B ..."
    tagged = parse_oarstat(_read("oarstat-tagged.json"))
    assert {j.resources for j in tagged} == {1}


@pytest.mark.parametrize("message", ["", "W=0:5:0", "R=,W=0:5:0", "R=0,W=0:5:0",
                                     "XR=2,W=0:5:0"])
def test_a_message_without_a_resource_count_gives_none(message: str) -> None:
    (job,) = parse_oarstat(json.dumps({"1": {"state": "Hold", "message": message}}))
    assert job.resources is None
