"""What a ``manager run`` says at its end about jobs that did not complete: failed ones,
and ones cancelled by someone other than the manager (exit 5 for either)."""

from __future__ import annotations

import pytest

from malleable.commands.manager import JOBS_FAILED, report_unfinished
from malleable.manager import Manager
from malleable.model import Cancel, JobState, Place
from malleable.resources import JobEvent
from malleable.service import cancelled_elsewhere
from tests.fakes.builders import mjob
from tests.fakes.scripted import ScriptedCluster, ScriptedPolicy


def _once(*actions: Cancel | Place) -> ScriptedPolicy:
    todo = [list(actions)]
    return ScriptedPolicy(lambda view, now: todo.pop() if todo else [])


def test_only_jobs_the_manager_did_not_cancel_are_cancelled_elsewhere() -> None:
    rm = ScriptedCluster()
    m = Manager(_once(Place("a", "c", 2), Place("b", "c", 2), Cancel("w", "user asked")),
                {rm.name: rm})
    for job_id in ("a", "b", "w", "d"):
        m.submit(mjob(job_id, lo=1, hi=8, init=2))
    m.cycle(1.0)
    m.policy = _once(Cancel("a", "the policy's"))
    m.cycle(2.0)
    rm.emit(JobEvent(2.5, "a", JobState.CANCELLED, 0, "CANCELLED by 1000"))
    rm.emit(JobEvent(2.6, "b", JobState.CANCELLED, 0, "CANCELLED by 0 None"))
    m.cycle(3.0)
    assert {j: r.state for j, r in m.records.items() if r.state.finished} == {
        "a": JobState.CANCELLED, "b": JobState.CANCELLED, "w": JobState.CANCELLED}
    # a and w were cancelled by the manager (a running, w waiting); b by its site
    assert cancelled_elsewhere(m) == {"b": "CANCELLED by 0 None"}


@pytest.mark.parametrize(("summary", "code", "lines"), [
    ({"failed_jobs": {}, "cancelled_elsewhere": {}}, 0, []),
    ({}, 0, []),
    ({"failed_jobs": {"j1": "NODE_FAIL"}}, JOBS_FAILED, ["1 job(s) failed: j1: NODE_FAIL"]),
    ({"failed_jobs": {}, "cancelled_elsewhere": {"j2": "CANCELLED by 0"}}, JOBS_FAILED,
     ["1 job(s) were cancelled outside the manager: j2: CANCELLED by 0"]),
    ({"failed_jobs": {"j1": "x"}, "cancelled_elsewhere": {f"k{i}": "c" for i in range(7)}},
     JOBS_FAILED, ["1 job(s) failed: j1: x", "7 job(s) were cancelled outside the manager: "
                   "k0: c; k1: c; k2: c; k3: c; k4: c (and 2 more)"]),
])
def test_the_end_of_a_run_names_what_did_not_complete(
        summary: dict[str, dict[str, str]], code: int, lines: list[str],
        capsys: pytest.CaptureFixture[str]) -> None:
    assert report_unfinished(summary) == code
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.splitlines() == lines
