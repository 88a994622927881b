"""The job payload: its remaining work follows its node count (scontrol faked on PATH)."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from malleable.adapters.slurm.payload import Payload
from malleable.model import JobKind, JobSpec, SizeRule

FAKE_SCONTROL = """#!/bin/sh
echo "JobId=$4 JobName=x JobState=RUNNING NumNodes=$(cat "$SIZE_FILE") NumCPUs=1"
"""


def _spec(app: str = "ft", runtime: float | None = None) -> JobSpec:
    return JobSpec("wm-1", JobKind.MALLEABLE, 2, 8, 2, app=app, runtime=runtime,
                   size_rule=SizeRule.POW2 if app == "ft" else SizeRule.ANY)


def test_times_follow_the_application_model() -> None:
    times = Payload(time_scale=0.5, speed=2.0).times(_spec())
    assert sorted(times) == list(range(2, 9))
    assert times[2] == pytest.approx((60 + 120 / 2) * 0.5 / 2.0)
    assert times[8] == pytest.approx((60 + 120 / 8) * 0.5 / 2.0)
    fixed = Payload(time_scale=0.1).times(_spec("fixed", runtime=50.0))
    assert list(fixed.values()) == pytest.approx([5.0] * 7)
    assert Payload(time_scale=0.001).time_limit_minutes(_spec()) == 5
    assert Payload(time_scale=10).time_limit_minutes(_spec()) == int(3 * 1200 / 60) + 1


def test_bad_payload_settings() -> None:
    with pytest.raises(ValueError, match="time_scale"):
        Payload(time_scale=0)
    with pytest.raises(ValueError, match="finish_file must be an absolute path"):
        Payload(finish_file="end")


def _run(tmp_path: Path, script: str, size_file: Path) -> subprocess.Popen[str]:
    (tmp_path / "bin").mkdir(exist_ok=True)
    fake = tmp_path / "bin" / "scontrol"
    fake.write_text(FAKE_SCONTROL)
    fake.chmod(0o755)
    path = tmp_path / "job.py"
    path.write_text(script)
    env = {**os.environ, "PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}",
           "SLURM_JOB_ID": "42", "SIZE_FILE": str(size_file)}
    return subprocess.Popen([sys.executable, str(path)], env=env, stdout=subprocess.PIPE,
                            text=True)


def _timed_lines(child: subprocess.Popen[str]) -> list[tuple[float, list[str]]]:
    """The child's output lines, each with the parent's clock when it arrived."""
    assert child.stdout is not None
    lines = [(time.monotonic(), line.split()) for line in child.stdout]
    child.wait(timeout=30)
    return lines


def _after_resize(lines: list[tuple[float, list[str]]]) -> tuple[float, float]:
    """(fraction of the work done at the resize, seconds from the resize to the end)."""
    resized = [(t, words) for t, words in lines if words[0] == "resized"]
    ended = [t for t, words in lines if words[0] == "end"]
    assert len(resized) == 1 and len(ended) == 1, lines
    (at, words), end = resized[0], ended[0]
    return float(words[-1]), end - at


# ft at 2 nodes: 120 model s -> 4.8 s; at 8 nodes: 75 model s -> 3.0 s (scale 0.04). The
# bounds come from the model, measured from the job's own report of the resize, so that a
# slow start (a loaded machine) does not count: the rest of the work can never take less
# than at the new size, and must take less (grow) or more (shrink) than at the old one.
AT_2, AT_8 = 4.8, 3.0


def test_a_grown_job_ends_sooner(tmp_path: Path) -> None:
    payload = Payload(time_scale=0.04, tick=0.05)
    size = tmp_path / "size"
    size.write_text("2")
    child = _run(tmp_path, payload.script(_spec()), size)
    assert child.stdout is not None
    assert child.stdout.readline().split()[0] == "start"
    timer = threading.Timer(0.6, lambda: size.write_text("8"))
    timer.start()
    lines = _timed_lines(child)
    timer.cancel()
    assert child.returncode == 0
    assert lines[-1][1] == ["end", "42", "nodes", "8"]
    done, rest = _after_resize(lines)
    assert 0 < done < 1
    assert (1 - done) * AT_8 - 0.1 < rest < (1 - done) * AT_2


def test_a_shrunk_job_ends_later(tmp_path: Path) -> None:
    payload = Payload(time_scale=0.04, tick=0.05)
    size = tmp_path / "size"
    size.write_text("8")
    child = _run(tmp_path, payload.script(_spec()), size)
    assert child.stdout is not None
    assert child.stdout.readline().split()[0] == "start"
    threading.Timer(0.3, lambda: size.write_text("2")).start()
    lines = _timed_lines(child)
    assert lines[-1][1] == ["end", "42", "nodes", "2"]
    done, rest = _after_resize(lines)
    assert 0 < done < 1
    assert rest > (1 - done) * AT_2 - 0.1 > (1 - done) * AT_8


@pytest.mark.parametrize("job_id", ["a\\x", "b\\N", "c\\", 'd"""e', "f'g", "h\ni", "\\u00e9"])
def test_any_job_id_gives_a_script_that_compiles(job_id: str) -> None:
    # A job id with \x or \N in it made the docstring a SyntaxError (issue 12).
    from malleable.adapters.oar.payload import OarPayload

    spec = JobSpec(job_id, JobKind.MALLEABLE, 2, 8, 2, app="ft", size_rule=SizeRule.POW2)
    for script in (Payload().script(spec), OarPayload().script(spec)):
        module = compile(script, "payload", "exec")
        assert job_id in str(module.co_consts[0])  # the docstring names the job


def test_a_finish_file_ends_the_work_left_at_the_next_tick(tmp_path: Path) -> None:
    # ft: 4.8 s at 2 nodes, 3.0 s at 8. Resized to 8 after 0.3 s, the file appears after
    # 0.6 s: the script ends at the next tick, exit 0, sooner than the work left at 8 nodes
    # would allow, with its size kept.
    finish = tmp_path / "finish"
    payload = Payload(time_scale=0.04, tick=0.05, finish_file=str(finish))
    size = tmp_path / "size"
    size.write_text("2")
    child = _run(tmp_path, payload.script(_spec()), size)
    assert child.stdout is not None
    assert child.stdout.readline().split()[0] == "start"
    threading.Timer(0.3, lambda: size.write_text("8")).start()
    written: list[float] = []
    timer = threading.Timer(0.6, lambda: (finish.write_text(""), written.append(time.monotonic())))
    timer.start()
    lines = _timed_lines(child)
    assert child.returncode == 0
    assert [words[0] for _, words in lines] == ["resized", "finish", "end"]
    assert lines[-1][1] == ["end", "42", "nodes", "8"]
    words = lines[1][1]
    assert words[:3] == ["finish", "file", str(finish)]
    done = float(words[-1])  # the work done when the file was found
    assert 0 < done < 1
    assert lines[-1][0] - written[0] < (1 - done) * AT_8


def test_without_the_finish_file_the_work_runs_to_its_end(tmp_path: Path) -> None:
    # A finish file that never appears (and one of another job's site) changes nothing.
    payload = Payload(time_scale=0.01, tick=0.05, finish_file=str(tmp_path / "absent"))
    size = tmp_path / "size"
    size.write_text("8")
    began = time.monotonic()
    child = _run(tmp_path, payload.script(_spec()), size)
    lines = _timed_lines(child)
    assert child.returncode == 0
    assert [words[0] for _, words in lines] == ["start", "end"]
    assert time.monotonic() - began >= 75 * 0.01  # ft at 8 nodes: 75 model s
