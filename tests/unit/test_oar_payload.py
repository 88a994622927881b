"""The OAR payload: its size from $OAR_NODEFILE, then from the size file the adapter writes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from malleable.adapters.oar.payload import OarPayload
from malleable.model import JobKind, JobSpec


def _run(tmp_path: Path, size_file: str | None, finish_file: str | None = None) -> str:
    spec = JobSpec("j", JobKind.MALLEABLE, 1, 4, 2, app="fixed", runtime=2.0)
    script = tmp_path / "m.r.j.py"
    script.write_text(OarPayload(time_scale=0.2, tick=0.05, finish_file=finish_file).script(spec))
    nodefile = tmp_path / "nodes"
    nodefile.write_text("n1\nn1\nn2\n")
    if size_file is not None:
        (tmp_path / "m.r.j.size").write_text(size_file)
    env = {"OAR_NODEFILE": str(nodefile), "OAR_JOB_ID": "7", "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=30, env=env, check=True)
    return done.stdout


def test_size_from_the_nodefile_without_a_size_file(tmp_path: Path) -> None:
    out = _run(tmp_path, None)
    assert out.startswith("start 7 nodes 2") and out.rstrip().endswith("end 7 nodes 2")


def test_size_from_the_size_file(tmp_path: Path) -> None:
    out = _run(tmp_path, "3\n")
    assert out.startswith("start 7 nodes 3")


def test_a_finish_file_there_from_the_start_ends_the_work_at_the_first_tick(
        tmp_path: Path) -> None:
    finish = tmp_path / "finish"
    finish.write_text("")
    out = _run(tmp_path, None, str(finish)).split("\n")
    assert out[0] == "start 7 nodes 2 seconds 0.4"
    assert out[1].startswith(f"finish file {finish} done ")
    assert 0 < float(out[1].split()[-1]) < 1  # one tick (0.05 s of 0.4 s, more if loaded)
    assert out[2:] == ["end 7 nodes 2", ""]


def test_walltime_and_extension_command() -> None:
    spec = JobSpec("j", JobKind.RIGID, 2, 2, 2, app="fixed", runtime=60.0)
    assert OarPayload().walltime(spec) == "0:05:00"
    assert "oarstat -s -j 42" in OarPayload.extension(42)
