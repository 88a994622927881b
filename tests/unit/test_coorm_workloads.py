"""W0-W3 and the legacy-job model; reading legacy jobs from an SWF trace."""

from __future__ import annotations

from pathlib import Path
from statistics import mean

import pytest

from malleable.errors import InputError
from malleable.workloads.coorm import legacy_jobs, swf_jobs, workload


def test_legacy_model_is_reproducible_and_plausible() -> None:
    jobs = legacy_jobs(2000, seed=3)
    assert jobs == legacy_jobs(2000, seed=3) and jobs != legacy_jobs(2000, seed=4)
    assert all(1 <= j.hosts <= 128 and 0 < j.runtime <= j.walltime for j in jobs)
    assert 3600 <= mean(j.runtime for j in jobs) <= 7200  # about the trace's 1.5 h
    assert sum(j.hosts == 1 for j in jobs) / len(jobs) == pytest.approx(0.15, abs=0.03)


def test_workload_shares() -> None:
    pack = legacy_jobs(200, seed=1)
    w0 = workload("W0", pack, seed=1)
    kinds = [j.app.kind for j in w0]
    assert len(w0) == 200 and kinds.count("cem") == 0
    assert kinds.count("amdahl") / 200 == pytest.approx(0.2, abs=0.07)
    assert [j.submit for j in w0] == [float(i) for i in range(200)]  # one per second
    w1 = workload("W1", pack, seed=1)
    assert len(w1) == 201 and [j.app.kind for j in w1].count("cem") == 1
    assert [j.app.kind for j in workload("W2", pack, seed=1)].count("cem") == 100
    assert {j.app.kind for j in workload("W3", pack, seed=1)} == {"cem"}
    delayed = workload("W1", pack, seed=1, adaptation_delay=7.0)
    assert {j.adaptation_delay for j in delayed if j.app.kind == "cem"} == {7.0}
    assert {j.adaptation_delay for j in delayed if j.app.kind != "cem"} == {0.0}
    with pytest.raises(InputError, match="W0"):
        workload("W9", pack, seed=1)


def _swf(path: Path, rows: list[tuple[int, int, int, int]]) -> Path:
    lines = ["; Version: 2.2"]
    for i, (run, procs, req_procs, req_time) in enumerate(rows, start=1):
        fields = [i, i * 10, 0, run, procs, -1, -1, req_procs, req_time] + [-1] * 9
        lines.append(" ".join(str(f) for f in fields))
    path.write_text("\n".join(lines) + "\n")
    return path


def test_swf_packs(tmp_path: Path) -> None:
    trace = _swf(tmp_path / "t.swf", [
        (100, 8, 8, 200), (50, 2048, 2048, 100), (30, 16, 16, -1), (-1, 8, 8, 10),
        (70, 4, 4, 60), (90, 1, 1, 300)])
    jobs = swf_jobs(trace, count=2, pack=0, max_hosts=128, cores_per_host=8)
    assert [(j.hosts, j.runtime, j.walltime) for j in jobs] == [(1, 100, 200), (2, 30, 30)]
    second = swf_jobs(trace, count=2, pack=1, max_hosts=128, cores_per_host=8)
    assert [(j.hosts, j.runtime, j.walltime) for j in second] == [(1, 70, 70), (1, 90, 300)]
    with pytest.raises(InputError, match="usable jobs"):
        swf_jobs(trace, count=3, pack=1, max_hosts=128, cores_per_host=8)
