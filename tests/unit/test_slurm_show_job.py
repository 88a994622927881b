"""The adapter reads one job as the poll and the runner do (issue 35, item 7): ``SlurmCtl.
show_job`` asks ``squeue --json`` (never ``scontrol -o show job``), picks its job out of
22.05's whole listing, and gives what ``scontrol`` gave on the same site: checked on the
output recorded on the testbed for each Slurm version (``tests/data/slurm/VERSION/``, both
commands run in the same scenario)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import pytest

from malleable.adapters.shell import CommandError, Result
from malleable.adapters.slurm.ctl import SlurmCtl
from malleable.adapters.slurm.parse import parse_scontrol_jobs

DATA = Path(__file__).resolve().parents[1] / "data" / "slurm"
VERSIONS = ("22.05", "24.11", "26.05")


class Answers:
    """A runner that answers every argv with one recorded result, and logs the argv."""

    def __init__(self, result: Result) -> None:
        self.result = result
        self.log: list[list[str]] = []

    def run(self, argv: Sequence[str], timeout: float, *, input: str | None = None,
            check: bool = True) -> Result:
        self.log.append(list(argv))
        return self.result

    def close(self) -> None:
        pass


def _listing(version: str, job_id: int) -> tuple[str, bool]:
    """The recorded ``squeue --json`` that lists ``job_id``, and whether it was recorded in
    the same run as ``scontrol.txt``: the scenario's plain listing, else the ended helper's
    (``--states=all``: 24.11 and 26.05 leave an ended job out of a plain listing; recorded
    in a later run of the same scenario, so its helper ran on another node)."""
    for name in ("squeue.json", "squeue_helper.json"):
        text = (DATA / version / name).read_text()
        if any(j["job_id"] == job_id for j in json.loads(text)["jobs"]):
            return text, name == "squeue.json"
    raise AssertionError(f"{version}: job {job_id} recorded by scontrol only")


@pytest.mark.parametrize("version", VERSIONS)
def test_a_job_read_back_is_what_scontrol_showed(version: str) -> None:
    shown = parse_scontrol_jobs((DATA / version / "scontrol.txt").read_text())
    assert len(shown) >= 3
    for old in shown:
        text, same_run = _listing(version, old.job_id)
        runner = Answers(Result(0, text, ""))
        new = SlurmCtl(runner).show_job(old.job_id)
        assert new is not None, old.job_id
        assert (new.job_id, new.state_raw, new.state, new.nodes, new.user, new.name) == (
            old.job_id, old.state_raw, old.state, old.nodes, old.user, old.name)
        assert (new.node_list, new.reason, new.partition, new.account, new.qos) == (
            old.node_list, old.reason, old.partition, old.account, old.qos)
        if old.batch_host and same_run:
            assert new.batch_host == old.batch_host
        assert runner.log == [["squeue", "--json", "--states=all", f"--jobs={old.job_id}"]]


def test_one_word_for_the_state_and_gone_jobs() -> None:
    """24.11 lists a state's flags after its base (``COMPLETED COMPLETING``): the reader
    keeps scontrol's one word, so a helper still completing is not taken as gone. A job
    not listed, or "Invalid job id" (24.11, 26.05), is gone; another failure is an error."""
    data = json.loads((DATA / "24.11" / "squeue_helper.json").read_text())
    data["jobs"][0]["job_state"] = ["COMPLETED", "COMPLETING"]
    job_id = data["jobs"][0]["job_id"]
    ctl = SlurmCtl(Answers(Result(0, json.dumps(data), "")))
    found = ctl.show_job(job_id)
    assert found is not None and found.state_raw == "COMPLETING" and found.completing
    assert ctl.show_job(job_id + 1000) is None
    unknown = (DATA / "24.11" / "squeue_unknown.txt").read_text().partition("\n")[2]
    assert SlurmCtl(Answers(Result(1, "", unknown))).show_job(999999) is None
    with pytest.raises(CommandError):
        SlurmCtl(Answers(Result(1, "", "slurm_load_jobs error: Unable to contact slurm "
                                       "controller\n"))).show_job(7)
