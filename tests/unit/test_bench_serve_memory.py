"""The memory soak of the site service on the fake Slurm (benchmarks/bench_serve_memory.py),
at a small cycle count: the path CI runs, and its figures are what the service keeps."""

from __future__ import annotations

import pytest
from benchmarks import bench_serve_memory as bench

import malleable.site.daemon as daemon


def test_memory_soak_runs_and_the_service_keeps_o_live_jobs(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(daemon, "KEEP_FINISHED_JOBS", 5)
    monkeypatch.setattr(daemon, "KEEP_HISTORY", 4)
    soak = bench.run(cycles=60, warmup=20, sites=2, seed=3, top=5)
    assert soak.submitted == 60 and soak.ended > 10 and soak.resizes > 0
    assert soak.warmup_bytes > 0 and soak.ratio > 0
    sizes = soak.sizes
    live = sizes["live"]
    assert 0 < live < soak.submitted - 10
    assert sizes["records"] <= live + 5 and sizes["status.jobs"] == sizes["records"]
    assert sizes["s0._mine"] + sizes["s1._mine"] <= live + 5
    assert sizes["operations"] <= 8 and sizes["s0.resizes"] <= 8
    assert len(soak.top) == 5


def test_memory_soak_refuses_a_warmup_past_the_end() -> None:
    with pytest.raises(SystemExit):
        bench.run(cycles=10, warmup=10, sites=1, seed=1)
