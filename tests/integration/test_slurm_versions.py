"""What each Slurm version prints, read by the adapter's parsers: a fixed scenario (a job
shrunk and grown with the expand protocol, another user's running job, a pending job) on
the ``uva`` site of each version's testbed, checked the same way on every version.

With ``MALLEABLE_RECORD_SLURM=DIR`` the outputs are also written to ``DIR/VERSION/``; that
is how ``tests/data/slurm/{22.05,24.11,26.05}/`` were recorded (the unit tests in
tests/unit/test_slurm_versions.py, with the same checks read them without a testbed).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from malleable.adapters.slurm.parse import job_argv, parse_salloc, parse_scontrol_jobs
from malleable.testbed import Testbed
from tests.fakes.slurm_versions import check_outputs
from tests.fakes.waits import site_quiet, site_state, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

SITE = "uva"
SACCT = ["env", "SLURM_TIME_FORMAT=%s", "sacct", "-X", "--parsable2", "--allusers",
         "--format=JobID,JobName,State,NNodes,Start,End"]


def _as(tb: Testbed, user: str, argv: list[str]) -> str:
    result = tb.exec(SITE, argv, user=user, timeout=60)
    assert result.ok, f"{argv}: {result.stderr}"
    return result.stdout + result.stderr


def _nodes(tb: Testbed, job: int) -> tuple[str, int]:
    found = parse_scontrol_jobs(_as(tb, "root", ["scontrol", "-o", "show", "job", str(job)]))
    return found[0].state_raw, found[0].nodes


def _accounted(tb: Testbed, ids: str) -> bool:
    """Has slurmdbd caught up with what squeue shows? (Raw text: the parsers are what the
    test checks.) Each job by name, with the state of its last record."""
    want = dict(zip(ids.split(","), (("grow", "RUNNING"), ("helper", None), ("other", "RUNNING"),
                                      ("waiting", "PENDING")), strict=True))
    rows = [row.split("|") for row in _as(tb, "root", [*SACCT, f"--jobs={ids}"]).splitlines()[1:]]
    seen = {row[0]: (row[1], row[2]) for row in rows if len(row) > 2}
    return seen.keys() == want.keys() and all(seen[job][0] == name and state in (None, seen[job][1])
                                              for job, (name, state) in want.items())


def run_scenario(tb: Testbed) -> dict[str, str]:
    """Submit, shrink, expand; return what the adapter's commands print (by file name)."""
    # The default version's testbed is the session's shared one: the tests before may have
    # left jobs ending or nodes coming back (a killed container); the scenario needs uva idle.
    wait_for(lambda: site_quiet(tb, SITE), 240, f"every node of {SITE} idle and its queue empty",
             explain=lambda: site_state(tb, SITE))
    out = {"version.txt": _as(tb, "root", ["sinfo", "--version"]),
           "sinfo_idle.json": _as(tb, "root", ["sinfo", "--json"])}
    grow = int(_as(tb, "malleable", ["sbatch", "--parsable", "-N3", "--exclusive",
                                     "--job-name=grow", "--output=/dev/null", "--wrap",
                                     "sleep 300"]).split(";")[0])
    wait_for(lambda: _nodes(tb, grow) == ("RUNNING", 3), 60, "the job to run on 3 nodes")
    _as(tb, "malleable", ["scontrol", "update", f"JobId={grow}", "NumNodes=1"])
    wait_for(lambda: _nodes(tb, grow) == ("RUNNING", 1), 30, "the job to shrink to 1")
    # slurmdbd keys a resized job's records by the second of the resize: a shrink and a
    # grow in the same second collide, and sacct then shows the job RESIZING for good
    # (seen on 22.05, in CI and here); the adapter never resizes a job twice in a second
    time.sleep(1.5)
    helper, granted = parse_salloc(_as(tb, "malleable", [
        "salloc", "--no-shell", "--immediate=20", "-N1", "--exclusive",
        f"--dependency=expand:{grow}", "--job-name=helper"]))
    assert granted and helper is not None
    _as(tb, "malleable", ["scontrol", "update", f"JobId={helper}", "NumNodes=0"])
    _as(tb, "malleable", ["scancel", str(helper)])
    _as(tb, "malleable", ["scontrol", "update", f"JobId={grow}", "NumNodes=ALL"])
    wait_for(lambda: _nodes(tb, grow) == ("RUNNING", 2), 30, "the job to grow to 2")
    other = _as(tb, "alice", ["sbatch", "--parsable", "-N1", "--job-name=other",
                              "--output=/dev/null", "--wrap", "sleep 300"]).strip()
    wait_for(lambda: _nodes(tb, int(other))[0] == "RUNNING", 30, "alice's job to run")
    waiting = _as(tb, "bob", ["sbatch", "--parsable", "-N4", "--job-name=waiting",
                              "--output=/dev/null", "--wrap", "true"]).strip()
    ids = f"{grow},{helper},{other},{waiting}"
    # the runner's reader (job_argv) as the job's user: a running job, an ended one (the
    # helper), a job id Slurm never had (its exit code kept: some versions refuse it)
    unknown = tb.exec(SITE, job_argv(999999), user="malleable", timeout=60)
    out |= {"squeue_grow.json": _as(tb, "malleable", job_argv(grow)),
            "squeue_helper.json": _as(tb, "malleable", job_argv(helper)),
            "squeue_unknown.txt": f"rc={unknown.returncode}\n{unknown.stdout}{unknown.stderr}"}
    out |= {"squeue.json": _as(tb, "root", ["squeue", "--json"]),
            "sinfo_busy.json": _as(tb, "root", ["sinfo", "--json"]),
            "scontrol.txt": _as(tb, "root", ["scontrol", "-o", "show", "job"]),
            "ids.txt": ids + "\n"}
    # slurmdbd records asynchronously: for a moment a job just submitted can be missing from
    # sacct or there as a placeholder (name "allocation", 0 nodes), and a resized one
    # RESIZING (seen on 22.05 in CI)
    wait_for(lambda: _accounted(tb, ids), 60, f"slurmdbd to record jobs {ids} as squeue shows them")
    out["sacct.txt"] = _as(tb, "root", [*SACCT, f"--jobs={ids}"])
    _as(tb, "root", ["scancel", str(grow), other, waiting])
    wait_for(lambda: not _as(tb, "root", ["squeue", "--noheader", "--format=%i"]).strip(), 60,
             f"an empty queue on {SITE} after the scenario")
    return out


def test_each_version_prints_what_the_parsers_read(versioned_testbed: Testbed) -> None:
    out = run_scenario(versioned_testbed)
    version = check_outputs(out)
    assert version.startswith(versioned_testbed.record().slurm + ".")
    target = os.environ.get("MALLEABLE_RECORD_SLURM")
    if target:
        folder = Path(target) / versioned_testbed.record().slurm
        folder.mkdir(parents=True, exist_ok=True)
        for name, text in out.items():
            (folder / name).write_text(text)
