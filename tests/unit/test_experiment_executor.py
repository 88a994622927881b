"""``--executor``: the runs of a sweep here or as one job array through submitit.

The job array is exercised with submitit's own stand-ins for Slurm: ``debug`` (in this
process) for the whole koala sweep, ``local`` (a subprocess per array task, result pickles
in the folder as on a cluster) for failures and ``--resume``. The real Slurm run is in
tests/integration/test_experiment_slurm.py.
"""

from __future__ import annotations

import functools
import json
import os
from pathlib import Path

import pytest

from malleable.cli import main
from malleable.errors import InputError
from malleable.experiments import executor
from malleable.experiments.executor import JobArray, Local, SweepFailed

ROOT = Path(__file__).resolve().parents[2]


def square_logged(x: int, log: str, fail: str) -> int:
    """x*x, appending x to ``log``; raises for 3 while the file ``fail`` exists."""
    with open(log, "a", encoding="utf-8") as f:
        f.write(f"{x}\n")
    if x == 3 and os.path.exists(fail):
        raise ValueError("three refused")
    return x * x


@pytest.fixture
def subprocess_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """submitit's local tasks are new interpreters: they import this checkout."""
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(ROOT / "src"), str(ROOT)]))


def _koala(out: Path, *extra: str) -> dict[str, object]:
    assert main(["experiment", "koala", "--quick", "--out", str(out), "--json", *extra]) == 0
    summary = json.loads((out / "summary.json").read_text(encoding="utf-8"))
    summary.pop("out")
    return summary


def test_koala_through_a_job_array_writes_what_a_local_run_writes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    local = _koala(tmp_path / "local")
    monkeypatch.setattr(executor, "from_args",
                        functools.partial(executor.from_args, cluster="debug"))
    array = _koala(tmp_path / "array", "--executor", "slurm", "--runs-per-task", "5",
                   "--max-tasks", "2")
    assert array == local
    assert local["simulations"] == 24
    for name in ("report.md", "fig7.png", "fig8.png"):
        assert ((tmp_path / "array" / name).read_bytes()
                == (tmp_path / "local" / name).read_bytes()), name
    manifest = json.loads((tmp_path / "array" / "submitit" / executor.MANIFEST).read_text())
    assert len(manifest) == executor.tasks(24, 5) == 5


def test_local_keeps_the_order_of_the_runs_on_several_workers() -> None:
    seen: list[int] = []
    out = Local(2).map(pow, [(x, 2) for x in range(7)], seen.append)
    assert out == [x * x for x in range(7)]
    assert sorted(seen) == list(range(7))


def test_failed_tasks_are_reported_and_resume_runs_only_them(
        tmp_path: Path, subprocess_path: None) -> None:
    log, fail = tmp_path / "log", tmp_path / "fail"
    fail.touch()
    runs = [(x, str(log), str(fail)) for x in range(1, 6)]
    folder = tmp_path / "submitit"
    done: list[int] = []
    array = JobArray(folder, cluster="local", runs_per_task=2, poll_seconds=0.2)
    with pytest.raises(SweepFailed, match=r"1 of 3 array tasks failed .*three refused.*"
                                          r"--resume"):
        array.map(square_logged, runs, done.append)
    assert sorted(done) == [0, 1, 4]  # the runs of the two tasks that finished
    assert sorted(int(x) for x in log.read_text().split()) == [1, 2, 3, 5]

    fail.unlink()
    log.write_text("")
    done.clear()
    again = JobArray(folder, cluster="local", runs_per_task=2, resume=True, poll_seconds=0.2)
    assert again.map(square_logged, runs, done.append) == [1, 4, 9, 16, 25]
    assert sorted(done) == [0, 1, 2, 3, 4]
    assert sorted(int(x) for x in log.read_text().split()) == [3, 4]  # only task 2 ran


def test_without_resume_every_task_runs_again(tmp_path: Path, subprocess_path: None) -> None:
    log, runs = tmp_path / "log", [(x, str(tmp_path / "log"), "-") for x in (1, 2)]
    for _ in range(2):
        assert JobArray(tmp_path / "s", cluster="local", poll_seconds=0.2).map(
            square_logged, runs) == [1, 4]
    assert sorted(int(x) for x in log.read_text().split()) == [1, 1, 2, 2]


@pytest.mark.parametrize("flag", ["--runs-per-task", "--max-tasks", "--time-limit"])
def test_counts_below_one_are_refused(flag: str, tmp_path: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["experiment", "koala", "--quick", "--out", str(tmp_path), "--executor",
                 "slurm", flag, "0"])
    assert code == InputError.exit_code
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"{flag} must be at least 1, not 0" in err[0]


def test_every_experiment_takes_the_executor_options(monkeypatch: pytest.MonkeyPatch) -> None:
    from malleable.cli import build_parser
    from malleable.experiments import EXPERIMENTS

    monkeypatch.setattr(executor.shutil, "which", lambda name: f"/usr/bin/{name}")  # a login node

    required = {"elastic": ["--trace", "/tmp/x.swf"]}  # the options an experiment requires
    for name in EXPERIMENTS:
        args = build_parser("experiment").parse_args(
            ["experiment", name, "--out", "/tmp/x", *required.get(name, []), "--executor",
             "slurm", "--max-tasks", "3", "--runs-per-task", "2", "--resume"])
        array = executor.from_args(args)
        assert isinstance(array, JobArray), name
        assert (array.max_tasks, array.runs_per_task, array.resume) == (3, 2, True)
        assert array.folder == Path("/tmp/x/submitit")
