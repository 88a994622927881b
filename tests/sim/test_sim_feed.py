"""The jobs reach the manager the same way from a list and from a plain trace's table
(issue 17: a million-job trace held as numbers, each job made when it is due): the same
records, operations, jobs.csv and summary, whatever the feed's batch size."""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
import pytest

from malleable.errors import InputError
from malleable.metrics.summary import jsonable
from malleable.model import Cluster
from malleable.policies.registry import PolicySpec
from malleable.service import run_simulation, stream_simulation
from malleable.sim import run
from malleable.sim.run import SimConfig, simulate
from malleable.workloads.load import load_workload, simulation_workload
from malleable.workloads.swf import read_jobs, read_swf
from malleable.workloads.swf_plain import JobTable


def _trace(tmp_path: Path, n: int = 300, seed: int = 4) -> Path:
    """A plain trace, not in submit order, with equal submit times and skipped jobs."""
    rng = random.Random(seed)
    lines = ["; Version: 2.2"]
    for i in range(1, n + 1):
        submit = rng.randrange(0, 40 * n, 30)
        runtime = rng.choice([-1, *range(10, 900, 7)])
        size = rng.choice([1, 2, 4, 8, 16])
        lines.append(f"{i} {submit} -1 {runtime} {size} -1 -1 {size} "
                     f"{rng.choice([-1, 2 * max(runtime, 1)])} -1 1 {rng.randint(-1, 4)} 1 "
                     "-1 -1 -1 -1 -1")
    path = tmp_path / "t.swf"
    path.write_text("\n".join(lines) + "\n")
    return path


def _first_difference(got: list[object], expected: list[object]) -> tuple[int, str] | None:
    """Where two lists' reprs first differ (a short failure, not a diff of whole runs)."""
    for i, (a, b) in enumerate(zip(got, expected, strict=False)):
        if repr(a) != repr(b):
            return i, f"{a!r} != {b!r}"
    return None if len(got) == len(expected) else (-1, f"{len(got)} != {len(expected)}")


@pytest.mark.parametrize("policy", ["fcfs", "easy"])
@pytest.mark.parametrize("batch", [1, 7, 1024])
def test_a_table_feeds_the_run_a_list_feeds(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                             policy: str, batch: int) -> None:
    path = _trace(tmp_path)
    monkeypatch.setattr(run, "FEED_BATCH", batch)
    table = read_jobs(path)
    assert isinstance(table, JobTable)
    spec = PolicySpec(policy)
    clusters = (Cluster("c", 16),)
    listed, list_summary = run_simulation(read_swf(path).jobs, clusters, spec, SimConfig())
    tabled, table_summary = run_simulation(table, clusters, spec, SimConfig())
    assert len(listed.records) == len(read_swf(path).jobs) == 299  # every job, one skipped
    assert _first_difference(tabled.records, listed.records) is None
    assert tabled.operations == listed.operations
    assert (tabled.start, tabled.end, table_summary) == (listed.start, listed.end,
                                                         list_summary)
    from_list = stream_simulation(read_swf(path).jobs, clusters, spec, SimConfig(),
                                  tmp_path / "list")
    from_table = stream_simulation(read_jobs(path), clusters, spec, SimConfig(),
                                   tmp_path / "table")
    assert json.dumps(jsonable(from_table)) == json.dumps(jsonable(from_list))
    assert ((tmp_path / "table" / "jobs.csv").read_bytes()
            == (tmp_path / "list" / "jobs.csv").read_bytes())


def test_a_list_is_emptied_when_consumed_and_its_jobs_all_run(tmp_path: Path) -> None:
    jobs = read_swf(_trace(tmp_path)).jobs
    count, ended = len(jobs), []
    result = simulate(jobs, (Cluster("c", 16),), PolicySpec("fcfs").build(), SimConfig(),
                      sink=lambda record, grows, shrinks: ended.append(record.spec.id),
                      consume=True)
    assert jobs == [] and len(ended) == count and result.records == []
    with pytest.raises(ValueError, match="consume needs a sink"):
        simulate([], (Cluster("c", 16),), PolicySpec("fcfs").build(), consume=True)


def test_no_jobs_is_an_empty_run() -> None:
    for jobs in ([], JobTable(np.empty((0, 7)))):
        result = simulate(jobs, (Cluster("c", 4),), PolicySpec("fcfs").build())
        assert (result.start, result.end, result.records) == (0.0, 0.0, [])


def test_simulate_reads_a_plain_trace_as_a_table(tmp_path: Path) -> None:
    path = _trace(tmp_path)
    assert isinstance(simulation_workload(str(path), 1), JobTable)
    assert simulation_workload("wm-prime", 1) == load_workload("wm-prime", 1)
    with pytest.raises(InputError, match="neither a file nor one of"):
        simulation_workload(str(tmp_path / "nope.swf"), 1)
