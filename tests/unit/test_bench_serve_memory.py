"""The memory soak of the site service on the fake Slurm (benchmarks/bench_serve_memory.py),
at a small cycle count: the path CI runs, and its figures are what the service keeps."""

from __future__ import annotations

import tracemalloc
from collections.abc import Iterator

import pytest
from benchmarks import bench_serve_memory as bench

import malleable.site.daemon as daemon


def test_memory_soak_runs_and_the_service_keeps_o_live_jobs(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setattr(daemon, "KEEP_FINISHED_JOBS", 5)
    monkeypatch.setattr(daemon, "KEEP_HISTORY", 4)
    soak = bench.run(cycles=60, warmup=20, sites=2, seed=3, top=5)
    assert soak.submitted == 60 and soak.ended > 10 and soak.resizes > 0
    assert soak.warmup_bytes > 0 and soak.middle_bytes > 0 and soak.ratio > 0
    assert sum(soak.halves) == soak.end_bytes - soak.warmup_bytes
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


@pytest.fixture
def tracing() -> Iterator[None]:
    started = not tracemalloc.is_tracing()
    if started:
        tracemalloc.start(1)
    yield
    if started:
        tracemalloc.stop()


def _dropped_tuples() -> int:
    """Makes 1500 tuples of 13 items and drops them (CPython parks them in its free list)."""
    return len([tuple([i] * 13) for i in range(1500)])  # the line the traces would name


def _traced_here(snap: tracemalloc.Snapshot) -> int:
    return sum(s.count for s in snap.statistics("lineno")
               if s.traceback[0].filename == __file__)


def test_a_snapshot_counts_live_objects_not_free_lists_or_garbage(tracing: None) -> None:
    # What serve4's snapshots took for poll objects kept alive: dropped tuples parked in the
    # free list keep the trace of the line that allocated them, and so does cyclic garbage.
    assert _dropped_tuples() == 1500
    cycles = [[] for _ in range(300)]
    for c in cycles:
        c.append(c)
    del cycles, c
    raw = tracemalloc.take_snapshot()
    assert _traced_here(raw) > 300  # the raw snapshot still names this file
    kept = [[i] for i in range(50)]
    assert _traced_here(bench.snapshot()) <= 2 * 51 + 10  # ``kept``: 51 lists, their items
    assert len(kept) == 50
