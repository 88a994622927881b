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


def test_a_grown_job_ends_sooner(tmp_path: Path) -> None:
    # ft at 2 nodes: 120 model s -> 2.4 s; at 8 nodes: 75 model s -> 1.5 s (scale 0.02).
    payload = Payload(time_scale=0.02, tick=0.05)
    size = tmp_path / "size"
    size.write_text("2")
    began = time.monotonic()
    child = _run(tmp_path, payload.script(_spec()), size)
    timer = threading.Timer(0.6, lambda: size.write_text("8"))
    timer.start()
    out, _ = child.communicate(timeout=30)
    took = time.monotonic() - began
    timer.cancel()
    assert child.returncode == 0
    assert "resized 2 -> 8" in out and "end 42 nodes 8" in out
    # 0.6 s at 2 nodes does 1/4 of the work; the rest takes 0.75 * 1.5 s at 8 nodes.
    expected = 0.6 + 0.75 * 1.5
    assert expected - 0.05 < took < expected + 0.6
    assert took < 2.4 - 0.3  # sooner than at 2 nodes throughout


def test_a_shrunk_job_ends_later(tmp_path: Path) -> None:
    payload = Payload(time_scale=0.02, tick=0.05)
    size = tmp_path / "size"
    size.write_text("8")
    began = time.monotonic()
    child = _run(tmp_path, payload.script(_spec()), size)
    threading.Timer(0.3, lambda: size.write_text("2")).start()
    child.communicate(timeout=30)
    took = time.monotonic() - began
    expected = 0.3 + (1 - 0.3 / 1.5) * 2.4
    assert expected - 0.05 < took < expected + 0.6


@pytest.mark.parametrize("job_id", ["a\\x", "b\\N", "c\\", 'd"""e', "f'g", "h\ni", "\\u00e9"])
def test_any_job_id_gives_a_script_that_compiles(job_id: str) -> None:
    # A job id with \x or \N in it made the docstring a SyntaxError (issue 12).
    from malleable.adapters.oar.payload import OarPayload

    spec = JobSpec(job_id, JobKind.MALLEABLE, 2, 8, 2, app="ft", size_rule=SizeRule.POW2)
    for script in (Payload().script(spec), OarPayload().script(spec)):
        module = compile(script, "payload", "exec")
        assert job_id in str(module.co_consts[0])  # the docstring names the job
