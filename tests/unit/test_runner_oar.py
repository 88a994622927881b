"""The MPI runner on OAR (runner/oar.py): the batch script, the shared-home shell and the
allocation as a job collection, on the fake OAR site (tests/fakes/oar.py)."""

from __future__ import annotations

import pytest

from malleable.adapters.oar.ctl import OarCtl
from malleable.adapters.shell import Result
from malleable.errors import ExternalError
from malleable.runner.launch import Launch, batch_script
from malleable.runner.oar import OarMpiJob, OarNodeShell, oar_mpi_job, oar_script
from tests.fakes.oar import FakeOar
from tests.fakes.scripted import RecordingRunner

LAUNCH = Launch("jacobi.py", "print('hi')\n", ("--iterations", "5"))


def test_the_script_uses_oars_job_id_and_node_file_and_stages_nothing() -> None:
    script = oar_script(LAUNCH)
    assert "SLURM" not in script and "scontrol" not in script
    assert 'D="$HOME"/.malleable/run/$OAR_JOB_ID' in script
    assert '"$OAR_NODEFILE"' in script and 'for n in "$FIRST"' in script
    assert "cat > " not in script  # the shared home is never copied onto itself
    assert script.count("\nmpirun ") == batch_script(LAUNCH).count("\nmpirun ") == 1


def test_a_slurm_script_of_another_shape_is_refused() -> None:
    import malleable.runner.oar as oar
    original = oar._SLURM_NODES
    try:
        oar._SLURM_NODES = "no such loop"
        with pytest.raises(ValueError, match="no node loop"):
            oar_script(LAUNCH)
    finally:
        oar._SLURM_NODES = original


def test_shared_files_are_read_and_written_on_the_login_host() -> None:
    rec = RecordingRunner(Result(0, "text", ""))
    shell = OarNodeShell(rec, shared="/home/malleable/")
    assert shell.read("grid-n001", "/home/malleable/.malleable/run/7/nodes") == "text"
    shell.write("grid-n001", "/home/malleable/x", "y")
    shell.read("grid-n001", "/tmp/elsewhere")
    assert rec.calls[0] == ["cat", "/home/malleable/.malleable/run/7/nodes"]
    assert rec.calls[1][:2] == ["sh", "-c"]
    assert rec.calls[2][:3] == ["ssh", "-o", "BatchMode=yes"]  # not shared: on the node
    assert shell.hostnames("grid-n001,grid-n002") == ["grid-n001", "grid-n002"]


def _job(fake: FakeOar) -> OarMpiJob:
    return oar_mpi_job(OarCtl(fake), LAUNCH, "/home/malleable", sleep=lambda s: None)


def test_submit_writes_the_script_into_the_home_and_runs_it_under_oar() -> None:
    fake = FakeOar([f"grid-n{k}" for k in range(1, 5)])
    job = _job(fake)
    assert job.launch.workdir == "/home/malleable/.malleable/run"
    job_id = job.submit(2)
    (path,) = [p for p in fake.files if p.endswith(".sh")]
    assert "$OAR_JOB_ID" in fake.files[path]
    assert fake.jobs[job_id].command == f"bash {path}" and fake.jobs[job_id].want == 2
    look = job.look()
    assert look is not None and look.state == "RUNNING" and look.node_list == "grid-n1,grid-n2"


def test_grow_is_extension_jobs_and_release_deletes_them() -> None:
    fake = FakeOar([f"grid-n{k}" for k in range(1, 5)])
    job = _job(fake)
    base = job.submit(2)
    job.nodes = [("grid-n1", "grid-c0"), ("grid-n2", "grid-c0")]
    added = job._expand(4)
    assert added == ["grid-n3", "grid-n4"] and len(job.extensions) == 2
    assert all(str(base) in fake.jobs[e].command for e in job.extensions.values())
    assert job.allocation() == ["grid-n1", "grid-n2", "grid-n3", "grid-n4"]
    job._release(["grid-n1", "grid-n2", "grid-n3"])
    assert list(job.extensions) == ["grid-n3"] and job.allocation() == [
        "grid-n1", "grid-n2", "grid-n3"]


def test_extensions_that_do_not_start_are_deleted_and_not_counted() -> None:
    fake = FakeOar([f"grid-n{k}" for k in range(1, 4)])
    job = _job(fake)
    job.grow_wait = 0.0
    job.submit(2)
    job.nodes = [("grid-n1", "grid-c0"), ("grid-n2", "grid-c0")]
    assert job._expand(4) == ["grid-n3"]  # one node free: the second extension waits
    waiting = [j for j in fake.jobs.values() if j.name == "mpi+" and j.state != "Running"]
    assert [j.state for j in waiting] == ["Error"]  # deleted


def test_cancel_deletes_base_and_extensions_and_a_deleted_job_is_cancelled() -> None:
    fake = FakeOar([f"grid-n{k}" for k in range(1, 4)])
    job = _job(fake)
    base = job.submit(1)
    job.nodes = [("grid-n1", "grid-c0")]
    job._expand(2)
    job.seen = set()  # no node to look for leftovers on (no ssh in the fake)
    assert job.cancel(timeout=1.0) == []
    assert {j.state for j in fake.jobs.values()} == {"Error"}
    look = job.look()
    assert look is not None and look.state == "CANCELLED" and base in fake.jobs


def test_an_oar_job_never_runs_slurm_commands() -> None:
    job = _job(FakeOar(["grid-n1"]))
    with pytest.raises(ExternalError, match="Slurm command"):
        job.ctl.poll()


def test_the_run_directory_exists_before_oar_starts_the_job() -> None:
    # OAR's bipbip errs a job whose -O/-E files it cannot create (the testbed's first
    # Jacobi run died so: ~/.malleable/run did not exist yet).
    fake = FakeOar([f"grid-n{k}" for k in range(1, 5)])
    job = _job(fake)
    job_id = job.submit(2)
    assert ["mkdir", "-p", "--", "/home/malleable/.malleable/run"] in fake.calls
    assert fake.jobs[job_id].state == "Running" and not fake.jobs[job_id].events


def test_a_job_oar_put_in_error_says_why() -> None:
    fake = FakeOar([f"grid-n{k}" for k in range(1, 5)])
    job = _job(fake)
    job_id = job.submit(2)
    fake.jobs[job_id].state = "Error"
    fake.jobs[job_id].events += ["SWITCH_INTO_ERROR_STATE", "OUTPUT_FILES"]
    with pytest.raises(ExternalError, match=r"is FAILED .*OUTPUT_FILES: .*Cannot create \.stdout"):
        job.poll_started()


def test_whether_the_job_ended_is_asked_of_oar_not_scontrol() -> None:
    # MpiJob.ended() asked scontrol, which fails on an OAR site: a base job that ended
    # without mpirun's exit code was taken as running until every wait timed out.
    fake = FakeOar([f"grid-n{k}" for k in range(1, 3)])
    job = _job(fake)
    base = job.submit(2)
    assert not job.ended()
    fake.finish(base, exit_code=1)
    assert job.ended()
    assert not any(c[0] == "scontrol" for c in fake.calls), fake.calls
    with pytest.raises(ExternalError, match="ended without an exit code"):
        job.wait_finished(5.0)


def test_describe_asks_oar_for_the_state_and_reads_the_stderr_oar_kept() -> None:
    fake = FakeOar([f"grid-n{k}" for k in range(1, 5)])
    job = _job(fake)
    job_id = job.submit(2)
    job.batch = "grid-n1"
    fake.files[f"/home/malleable/.malleable/run/OAR.{job_id}.stderr"] = "ORTE was unable\n"
    said = job.describe()
    assert said.startswith(f"job {job_id}: RUNNING") and "progress None" in said
    assert said.endswith("mpirun rc none, stderr: ORTE was unable")


def test_the_run_directories_may_be_a_shell_expression_the_job_expands() -> None:
    """``malleable submit --mpi`` does not know the user's home path: the job expands it."""
    script = oar_script(LAUNCH, run_root="$HOME/.malleable/run")
    assert 'D="$HOME/.malleable/run/$OAR_JOB_ID"\n' in script
    assert "/tmp/" not in script and "D=\"$HOME\"/.malleable/run" not in script
