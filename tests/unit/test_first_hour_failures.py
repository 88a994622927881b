"""Issue 40, item 5: start-up failures exit with their documented code and one line naming
the file, key or flag; options that used to be accepted silently are refused or counted.

Each test here failed on main 5ad7fe8 (exit 1 "unexpected error", exit 0 with no word, or
a run that never ended); docs/notes/issue-40-fhcli.md says how each was checked.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from malleable.cli import main
from malleable.errors import InputError
from malleable.experiments import executor

SRC = Path(__file__).resolve().parents[2] / "src"
RIGID = "{n} 0 -1 {run} {size} -1 -1 {size} {wall} -1 1 1 1 -1 1 -1 -1 -1\n"


def _err(capsys: pytest.CaptureFixture[str]) -> list[str]:
    return capsys.readouterr().err.strip().splitlines()


@pytest.mark.parametrize("port", ["70000", "-1", "65536"])
def test_coorm_serve_refuses_a_port_outside_0_65535(port: str,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["coorm", "serve", "--port", port])
    assert exit_.value.code == 2
    err = _err(capsys)
    assert len(err) == 1 and "--port" in err[0] and "65535" in err[0]


def test_coorm_serve_refuses_a_host_that_is_not_this_machine(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["coorm", "serve", "--host", "999.1.1.1", "--hosts", "2"]) == 2
    err = _err(capsys)
    assert len(err) == 1 and "--host 999.1.1.1" in err[0], err


def test_coorm_serve_says_the_port_is_in_use(capsys: pytest.CaptureFixture[str]) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert main(["coorm", "serve", "--port", str(port), "--hosts", "2"]) == 3
    err = _err(capsys)
    assert len(err) == 1 and f"--port {port}" in err[0] and "in use" in err[0], err


def test_coorm_serve_bounds_the_model_it_builds(capsys: pytest.CaptureFixture[str]) -> None:
    # 100,000 clusters: 5e9 links between them, never built
    with pytest.raises(SystemExit) as exit_:
        main(["coorm", "serve", "--clusters", "100000"])
    assert exit_.value.code == 2 and "--clusters" in capsys.readouterr().err


def test_executor_slurm_off_a_cluster_is_refused_before_any_run(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no sbatch (nor srun) here
    out = tmp_path / "out"
    assert main(["experiment", "dmrlib", "--quick", "--executor", "slurm",
                 "--out", str(out)]) == 3
    captured = capsys.readouterr()
    assert captured.err.strip().splitlines() == [
        "malleable: error: --executor slurm: no sbatch on this machine's PATH (run from a "
        "Slurm login node, or use --executor local)"]
    assert "simulating" not in captured.err and not out.exists()


def test_workers_are_capped_at_the_cores(caplog: pytest.LogCaptureFixture) -> None:
    args = argparse.Namespace(workers=100_000, executor="local")
    executor.check(args)
    assert args.workers == (os.cpu_count() or 1)
    assert "--workers 100000: using" in caplog.text


def test_workers_below_one_are_refused() -> None:
    with pytest.raises(InputError, match="--workers 0"):
        executor.check(argparse.Namespace(workers=0, executor="local"))


def test_a_pool_never_has_more_processes_than_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    made: list[int] = []

    class Pool:
        def __init__(self, max_workers: int) -> None:
            made.append(max_workers)
            raise RuntimeError("stop here")

    monkeypatch.setattr(executor, "ProcessPoolExecutor", Pool)
    with pytest.raises(RuntimeError):
        executor.Local(64).map(abs, [(1,), (2,), (3,)])
    assert made == [3]


def _as_nobody(argv: list[str]) -> subprocess.CompletedProcess[str]:
    """``python3 -m malleable ARGV`` as an unprivileged user (root writes anywhere)."""
    prefix: list[str] = []
    if os.geteuid() == 0:
        if shutil.which("setpriv") is None:
            pytest.skip("root without setpriv: a read-only directory cannot be made")
        prefix = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
    return subprocess.run([*prefix, sys.executable, "-m", "malleable", *argv],
                          capture_output=True, text=True, timeout=120, check=False,
                          env={**os.environ, "PYTHONPATH": str(SRC)})


def test_simulate_into_a_read_only_directory_is_refused_before_the_run() -> None:
    with tempfile.TemporaryDirectory() as tmp:  # pytest's own is closed to other users
        Path(tmp).chmod(0o755)
        out = Path(tmp) / "ro"
        out.mkdir()
        out.chmod(0o555)
        proc = _as_nobody(["simulate", "--out", str(out)])
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip().splitlines() == [
        f"malleable: error: {out}: cannot write in the output directory: Permission denied "
        "(give another --out)"]
    assert proc.stdout == ""  # refused before the run: no table


def test_an_output_file_that_cannot_be_written_is_named(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "jobs.csv").mkdir()
    assert main(["simulate", "--out", str(tmp_path)]) == 2
    assert _err(capsys) == [f"malleable: error: {tmp_path / 'jobs.csv'}: cannot write: Is a "
                            "directory (give another --out)"]


def test_a_platform_whose_reserve_leaves_no_node_is_refused(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "p.toml"
    config.write_text("[clusters.a]\nnodes = 4\nreserve = 4\n")
    assert main(["simulate", "--platform", str(config)]) == 2
    err = _err(capsys)
    assert len(err) == 1 and f"{config}: clusters.a.reserve: 4" in err[0], err


def test_a_platform_policy_table_is_used_and_checked(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "p.toml"
    config.write_text('[clusters.a]\nnodes = 40\n[policy]\nname = "nosuch"\n')
    assert main(["simulate", "--platform", str(config)]) == 2
    err = _err(capsys)
    assert len(err) == 1 and str(config) in err[0] and "nosuch" in err[0], err
    config.write_text('[clusters.a]\nnodes = 40\n[policy]\nname = "egs"\n'
                      '[policy.options]\napproach = "pwa"\n')
    assert main(["simulate", "--platform", str(config), "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert (summary["policy"], summary["approach"]) == ("egs", "pwa")
    assert main(["simulate", "--platform", str(config), "--policy", "fcfs", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["policy"] == "fcfs"  # --policy wins


def test_approach_and_policy_option_approach_that_disagree_are_refused(
        capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", "--approach", "pwa", "--policy-option", "approach=pra"]) == 2
    assert _err(capsys) == ["malleable: error: --approach pwa and --policy-option approach=pra "
                            "disagree: give one of them"]


@pytest.mark.parametrize("nodes", ["99999999999", "10000001", "0"])
def test_a_platform_node_count_is_bounded_as_swf_sizes(
        nodes: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", "--platform", nodes]) == 2
    err = _err(capsys)
    assert len(err) == 1 and f"--platform {nodes}" in err[0] and "10,000,000" in err[0]


def test_manager_run_without_the_slurm_commands_fails_at_once(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    config = tmp_path / "c.toml"
    config.write_text("[clusters.a]\nnodes = 4\n")  # no host: its commands run here
    out = tmp_path / "run"
    began = time.monotonic()
    assert main(["manager", "run", "--config", str(config), "--out", str(out)]) == 3
    assert time.monotonic() - began < 10  # was 305 s of retries
    err = _err(capsys)
    assert len(err) == 1 and "site a: sinfo" in err[0] and "command not found" in err[0], err
    assert not out.exists()


def test_a_job_larger_than_every_cluster_is_counted_rejected(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    trace = tmp_path / "w.swf"
    trace.write_text(RIGID.format(n=1, run=300, size=500, wall=600)
                     + RIGID.format(n=2, run=300, size=4, wall=600))
    assert main(["simulate", "--workload", str(trace), "--platform", "128", "--policy",
                 "fcfs", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert (summary["jobs"], summary["completed"], summary["rejected"]) == (2, 1, 1)


def test_the_table_says_rejected_and_no_nan(tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    trace = tmp_path / "w.swf"
    trace.write_text(RIGID.format(n=1, run=300, size=500, wall=600))
    assert main(["simulate", "--workload", str(trace), "--platform", "128"]) == 0
    out = capsys.readouterr().out
    assert "rejected" in out and "nan" not in out


def test_a_job_past_its_requested_time_under_easy_is_counted_and_said(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        caplog: pytest.LogCaptureFixture) -> None:
    trace = tmp_path / "w.swf"
    trace.write_text(RIGID.format(n=1, run=900, size=4, wall=600)
                     + RIGID.format(n=2, run=300, size=128, wall=600))
    assert main(["simulate", "--workload", str(trace), "--platform", "128", "--policy",
                 "easy", "--json"]) == 0
    captured = capsys.readouterr()
    summary = json.loads(captured.out)
    assert summary["past_walltime"] == 1 and summary["completed"] == 2
    assert "1 job(s) ran past their requested time" in caplog.text


@pytest.mark.parametrize("interarrival", ["1e-9", "0.1", "70"])
def test_a_background_load_no_cluster_can_serve_is_refused(
        interarrival: str, capsys: pytest.CaptureFixture[str]) -> None:
    began = time.monotonic()
    assert main(["simulate", "--background", interarrival]) == 2
    assert time.monotonic() - began < 10  # 1e-9 never ended; 0.1 ran over 100 s
    err = _err(capsys)
    assert len(err) == 1 and f"--background {float(interarrival):g}" in err[0], err
    assert "cluster leiden, which has 32" in err[0] and "more than 70.31 s" in err[0]


def test_a_background_load_the_clusters_serve_runs(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", "--background", "200", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["completed"] == 300


@pytest.mark.parametrize(("argv", "flag"), [
    (["koala", "--reps", "100000000"], "--reps"),
    (["dmrlib", "--sizes", "100", "1000000000"], "--sizes"),
    (["acds", "--job-counts", "20:100000000:20"], "--job-counts"),
    (["coorm", "--jobs-per-pack", "100000000"], "--jobs-per-pack"),
])
def test_an_experiment_sweep_of_days_is_refused_at_once(
        argv: list[str], flag: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    began = time.monotonic()
    assert main(["experiment", *argv, "--out", str(tmp_path / "o"), "--json"]) == 2
    assert time.monotonic() - began < 10  # ran silently until killed
    err = _err(capsys)
    assert len(err) == 1 and f"malleable: error: {flag} " in err[0] and "at most" in err[0]
    assert not (tmp_path / "o").exists()
