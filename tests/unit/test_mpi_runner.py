"""The runner's logic against a fake site (Slurm commands, nodes' files and an application
that answers offers), and the batch script it submits. The real thing runs in
tests/integration/test_app_*.py on the testbed."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from malleable.adapters.shell import Result
from malleable.errors import ExternalError
from malleable.model import SizeRule
from malleable.runner.job import MpiJob
from malleable.runner.launch import Launch, batch_script, private_remote_line, stage_command
from malleable.runner.nodes import NodeShell
from tests.fakes.mpi_site import FakeCtl, FakeResizer, FakeSite


def new_job(site: FakeSite, sleep: Callable[[float], None] = lambda s: None,
            **options: Any) -> MpiJob:
    """A job on the fake site, submitted; ``sleep`` is where a test lets the site move on."""
    job = MpiJob(FakeCtl(site), NodeShell(site), Launch("app.py", "print('hi')\n"),  # type: ignore[arg-type]
                 resizer=FakeResizer(site), sleep=sleep, poll=0.0,  # type: ignore[arg-type]
                 rejoin_gap=0.0, **options)
    job.submit(2)
    return job


def started_job(site: FakeSite, sleep: Callable[[float], None] = lambda s: None,
                **options: Any) -> tuple[MpiJob, FakeCtl]:
    """A job whose batch script has listed its nodes, seen started by the runner."""
    job = new_job(site, sleep, **options)
    site.files[("c0", ".malleable/run/7/nodes")] = "n1 c0\nn2 c0\n"
    job.wait_started(5)
    return job, job.ctl  # type: ignore[return-value]


def test_batch_script_starts_mpirun_inside_the_job_with_the_traps_avoided() -> None:
    script = batch_script(Launch("jacobi.py", "print('x')\n", ("--size", "64")))
    assert "--mca plm rsh" in script and "--mca ras '^slurm'" in script
    assert "--mca rmaps seq" in script and "--mca btl tcp,self" in script
    assert "btl_tcp_if_include eth0" in script
    assert 'base64 -d > "$D/jacobi.py"' in script and "cHJpbnQoJ3gnKQo=" in script
    assert '--channel "$D/ch" --result "$D/result.json" --size 64' in script
    assert 'echo "$rc" > "$D/ch/exit"' in script and '[ -s "$D/result.json" ]' in script
    with pytest.raises(ValueError, match="plain file name"):
        Launch("../x.py", "")


def _stage_locally(tmp_path: Path, stage: str) -> str:
    """Run a staging command with an ``ssh`` that runs the remote side on this machine (the
    batch host copying onto itself: one ``/tmp``); the program's text afterwards."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    fake = bin_dir / "ssh"
    fake.write_text('#!/bin/sh\nexec sh -c "$4"\n')  # ssh -o BatchMode=yes NODE COMMAND
    fake.chmod(0o755)
    run_dir = tmp_path / "run"
    run_dir.mkdir(mode=0o700, exist_ok=True)
    (run_dir / "app.py").write_text("print('the whole program')\n")
    script = f'{private_remote_line()}D={shlex.quote(str(run_dir))}; n=n1\n{stage}\n'
    subprocess.run(["bash", "-c", script], check=True, timeout=30, capture_output=True,
                   env={**os.environ, "PATH": f"{bin_dir}:{os.environ['PATH']}"})
    return (run_dir / "app.py").read_text()


def test_staging_refuses_a_run_directory_another_user_could_control(tmp_path: Path) -> None:
    """A symbolic link where the run directory goes, or a parent others may write (a
    squatter's ``/tmp`` directory): the copy is refused with one line, nothing written."""
    target = tmp_path / "elsewhere"
    target.mkdir(mode=0o700)
    (tmp_path / "run").symlink_to(target)
    with pytest.raises(subprocess.CalledProcessError) as caught:
        _stage_locally(tmp_path, stage_command("app.py"))
    assert b"is a symbolic link" in caught.value.stderr
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)
    with pytest.raises(subprocess.CalledProcessError) as caught:
        _stage_locally(shared, stage_command("app.py"))
    assert b"is writable by others" in caught.value.stderr


def test_staging_onto_the_batch_host_itself_keeps_the_program(tmp_path: Path) -> None:
    """The copy to the first node (the batch host, same /tmp) once went through a plain
    ``cat > FILE`` reading FILE: when the remote side truncated first, every rank ran an
    empty program that exited 0 at once (the Jacobi "ended before iteration 15" in CI)."""
    assert _stage_locally(tmp_path, stage_command("app.py")) == "print('the whole program')\n"
    plain = ('h=$(ssh -o BatchMode=yes "$n" "cat > \'$D/app.py\' && hostname" '
             '< "$D/app.py")')
    assert _stage_locally(tmp_path, plain) == ""  # the race, lost for certain here


def test_the_job_is_read_with_squeue_json_and_picked_among_every_job_listed() -> None:
    site = FakeSite()
    job, _ = started_job(site)
    looks = [a for a in site.log if a[0] == "squeue"]
    assert looks and looks[0] == ["squeue", "--json", "--states=all", "--jobs=7"]
    assert not any(a[:3] == ["scontrol", "-o", "show"] for a in site.log)
    look = job.look()
    assert look is not None and look.state == "RUNNING" and look.node_list == "n1,n2"


def test_a_job_squeue_no_longer_lists_is_gone() -> None:
    site = FakeSite()
    job, _ = started_job(site)
    site.state = "GONE"  # listed no more (22.05 lists the others and says nothing)
    assert job.look() is None and job.ended()
    assert job.allocation() == []


def test_start_reads_the_nodes_the_batch_script_listed() -> None:
    site = FakeSite()
    job, ctl = started_job(site)
    assert job.batch == "n1" and job.nodes == [("n1", "c0"), ("n2", "c0")]
    assert "--nodes=2" in ctl.submitted[0][0] and "--exclusive" in ctl.submitted[0][0]


def test_a_job_that_completed_before_the_first_look_started_but_a_failed_one_did_not() -> None:
    site = FakeSite(state="COMPLETED")
    job, _ = started_job(site)  # the short program ran its course between two looks
    assert job.nodes == [("n1", "c0"), ("n2", "c0")]
    site.state = "FAILED"
    failed = new_job(site)
    with pytest.raises(ExternalError, match="FAILED before the runner saw it start"):
        failed.wait_started(5)


def test_grow_allocates_first_then_offers_hosts_in_rank_order() -> None:
    site = FakeSite()
    job, _ = started_job(site)
    change = job.grow(2)
    assert (change.before, change.after, change.nodes_after, change.error) == (2, 4, 4, "")
    offer = json.loads(site.files[("c0", ".malleable/run/7/ch/offer.json")])
    assert offer["hosts"] == ["c0", "c0", "c1", "c1"] and offer["target"] == 4
    assert ("c1", ".malleable/run/7/app.py") in site.files  # program staged on new nodes
    assert job.nodes[2:] == [("n3", "c1"), ("n4", "c1")]


def test_power_of_two_application_offered_5_takes_4_and_the_fifth_node_goes_back() -> None:
    site = FakeSite(rule=SizeRule.POW2)
    job, _ = started_job(site)
    change = job.grow(3)
    assert (change.after, change.nodes_after) == (4, 4)
    assert site.alloc == ["n1", "n2", "n3", "n4"] and "n5" in site.free


def test_declined_or_failed_grow_gives_every_new_node_back() -> None:
    site = FakeSite(spawn_error="spawn failed: no slots")
    job, _ = started_job(site)
    change = job.grow(2)
    assert change.after == 2 and change.error == "spawn failed: no slots"
    assert site.alloc == ["n1", "n2"]


def test_shrink_asks_the_application_first_then_releases_the_nodes() -> None:
    site = FakeSite()
    job, _ = started_job(site)
    job.grow(2)
    change = job.shrink(3)
    assert (change.before, change.after, change.nodes_after) == (4, 1, 1)
    assert site.alloc == ["n1"]  # the batch host stays
    updates = [a for a in site.log if a[:2] == ["scontrol", "update"]]
    assert updates[-1][-1] == "NodeList=n1"


def test_a_shrink_cut_off_after_the_application_took_it_is_completed_by_the_next() -> None:
    """The connection to the site stalls after the application answered a shrink (CI saw
    it on a loaded machine): the shrink fails, the application runs on fewer processes
    than the runner counts, and the allocation still holds the nodes. The next shrink to
    the same size is answered at once, with no change, and gives the nodes back."""
    site = FakeSite()
    job, _ = started_job(site)
    job.grow(4)
    assert job.size == 6 and site.app_size == 6
    site.lost_reads.append("/done-2.json")
    with pytest.raises(ExternalError, match="Timeout opening channel"):
        job.shrink(3)
    assert site.app_size == 3 and job.size == 6 and len(site.alloc) == 6  # out of step
    change = job.shrink(3)
    assert (change.before, change.after, change.nodes_after) == (6, 3, 3)
    assert site.alloc == ["n1", "n2", "n3"] and site.app_size == 3


def test_a_refused_node_list_update_is_asked_again_then_reported_with_slurms_words() -> None:
    site = FakeSite()
    job, _ = started_job(site, release_timeout=0.0)
    job.grow(2)
    site.update_errors = 1  # once: the second try shrinks
    assert job.shrink(3).nodes_after == 1 and site.alloc == ["n1"]
    job.grow(1)
    site.update_errors = 2  # every try refused: the error says what Slurm said
    with pytest.raises(ExternalError, match=r"no longer pending execution.*'n1', 'n5'"):
        job.shrink(1)


def test_a_job_that_ends_while_it_is_shrunk_has_nothing_left_to_give_back() -> None:
    """A short program can end between its answer and the runner's ``scontrol update``;
    Slurm then refuses ("Job has already finished") and the shrink is not an error."""
    site = FakeSite()

    def the_program_ends_meanwhile(seconds: float) -> None:
        if site.update_errors == 0 and any(a[:2] == ["scontrol", "update"] for a in site.log):
            site.state = "COMPLETING"

    job, _ = started_job(site, the_program_ends_meanwhile)
    site.update_errors = 1
    change = job.shrink(1)
    assert (change.after, change.error) == (1, "")
    assert sum(a[:2] == ["scontrol", "update"] for a in site.log) == 1  # not asked again


def test_unanswered_offer_is_withdrawn_and_a_mandatory_shrink_reports_failure() -> None:
    site = FakeSite(answers=False)
    job, _ = started_job(site, answer_timeout=0.05)
    site.files[("c0", ".malleable/run/7/ch/answer-2.json")] = '{"accepted": 2}'
    change = job.shrink(1, mandatory=True)
    assert change.after == 2 and "declined a mandatory shrink" in change.error
    withdrawal = json.loads(site.files[("c0", ".malleable/run/7/ch/offer.json")])
    assert withdrawal == {"seq": 2, "target": 2, "hosts": ["c0", "c0"], "mandatory": False}


def test_a_slow_controller_while_an_offer_waits_is_not_taken_for_the_job_ending() -> None:
    """scontrol timing out under load made the runner give up a shrink offer at once and
    overwrite it with its withdrawal: the application never saw the shrink (issue 12)."""
    site = FakeSite(answers=False)
    offer = ("c0", ".malleable/run/7/ch/offer.json")

    def app_answers_later(seconds: float) -> None:
        if not site.answers and offer in site.files:
            site.answers = True
            site.app_reads(json.loads(site.files[offer]))

    job, _ = started_job(site, app_answers_later)
    site.show_errors = 3
    change = job.shrink(1)
    assert (change.before, change.after, change.error) == (2, 1, "")
    assert json.loads(site.files[offer])["seq"] == 1  # never withdrawn
    assert site.alloc == ["n1"]


def test_refused_expansion_changes_nothing() -> None:
    site = FakeSite(free=[])
    job, _ = started_job(site)
    assert job.grow(2).error == "no nodes added"


def test_cancel_ends_the_job_and_its_helper_allocations() -> None:
    site = FakeSite()
    job, _ = started_job(site)
    assert job.cancel(timeout=1.0) == []
    assert site.cancelled == [7, 8]


def test_requests_events_result_and_exit_code_come_from_the_channel() -> None:
    site = FakeSite()
    job, _ = started_job(site)
    ch = ".malleable/run/7/ch"
    site.files[("c0", f"{ch}/request-1.json")] = '{"n": 1, "target": 4}'
    assert [r["target"] for r in job.requests()] == [4]
    assert job.requests() == []
    site.files[("c0", f"{ch}/events.jsonl")] = '{"event": "start", "size": 2}\n'
    assert job.events() == [{"event": "start", "size": 2}]
    site.files[("c0", ".malleable/run/7/result.json")] = '{"checksum": 1.5}'
    site.files[("c0", f"{ch}/exit")] = "0\n"
    assert job.result() == {"checksum": 1.5} and job.wait_finished(1) == 0


def test_a_job_that_fails_before_starting_is_reported() -> None:
    site = FakeSite(state="FAILED")
    job = MpiJob(FakeCtl(site), NodeShell(site), Launch("a.py", ""),  # type: ignore[arg-type]
                 resizer=FakeResizer(site), sleep=lambda s: None)  # type: ignore[arg-type]
    job.submit(2)
    with pytest.raises(ExternalError, match=r"FAILED before the runner saw it start.*rc none"):
        job.wait_started(1)


def test_a_program_done_while_mpirun_lingers_is_taken_as_finished() -> None:
    site = FakeSite()
    job, _ = started_job(site, linger=0.0)
    site.files[("c0", ".malleable/run/7/result.json")] = '{"checksum": 1.0}'
    assert job.wait_finished(5) == 0
    assert site.cancelled == [7, 8]


def test_a_job_that_vanishes_without_an_exit_code_is_an_error() -> None:
    site = FakeSite()
    job, _ = started_job(site)
    site.state = "FAILED"
    with pytest.raises(ExternalError, match="ended without an exit code"):
        job.wait_finished(5)


def test_a_read_that_times_out_is_not_there_yet() -> None:
    """A loaded machine: one `cat` over SSH not answered in time; the next look decides."""
    from malleable.adapters.shell import CommandTimeout

    class Slow:
        def __init__(self) -> None:
            self.calls = 0

        def run(self, argv: list[str], timeout: float, *, input: str | None = None,
                check: bool = True) -> Result:
            self.calls += 1
            if self.calls == 1:
                raise CommandTimeout(argv, timeout)
            return Result(0, "n1 c0\n", "")

        def close(self) -> None:
            pass

    shell = NodeShell(Slow())  # type: ignore[arg-type]
    assert shell.read("n1", "/tmp/x") is None
    assert shell.read("n1", "/tmp/x") == "n1 c0\n"


def test_describe_says_the_state_the_progress_and_what_mpirun_left() -> None:
    site = FakeSite()
    job, _ = started_job(site)
    ch = ".malleable/run/7/ch"
    site.files[("c0", f"{ch}/progress.json")] = '{"iteration": 3, "size": 2}'
    site.files[("c0", f"{ch}/mpirun_rc")] = "1\n"
    site.files[("c0", f"{ch}/exit")] = "1\n"
    said = job.describe()
    assert said.startswith("job 7: RUNNING")
    assert "progress {'iteration': 3, 'size': 2}" in said and "exit 1" in said
    assert "mpirun rc 1" in said
