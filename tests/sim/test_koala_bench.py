"""The AccaSim comparison's pieces: our FCFS against an independent reference on a
generated trace, and the benchmark's parsing and comparison helpers."""

from __future__ import annotations

import heapq
import random
import sys
from pathlib import Path

import pytest

from malleable.model import Cluster, JobKind, JobSpec
from malleable.policies.fcfs import FCFS
from malleable.sim.run import SimConfig, simulate
from malleable.workloads.swf import read_swf

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from benchmarks import bench_sim  # noqa: E402


def reference_fcfs(jobs: list[tuple[str, int, int, int]], nodes: int) -> dict[str, int]:
    """Strict FCFS on one cluster, written independently: at each time, ends free their
    nodes, then arrivals join the queue, then the queue head starts while it fits."""
    order = sorted(jobs, key=lambda j: (j[1], int(j[0])))
    ends: list[tuple[int, int]] = []
    queue: list[tuple[str, int, int, int]] = []
    starts: dict[str, int] = {}
    free, i = nodes, 0
    while i < len(order) or queue or ends:
        times = [t for t in (order[i][1] if i < len(order) else None,
                             ends[0][0] if ends else None) if t is not None]
        now = min(times)
        while ends and ends[0][0] == now:
            free += heapq.heappop(ends)[1]
        while i < len(order) and order[i][1] == now:
            queue.append(order[i])
            i += 1
        while queue and queue[0][3] <= free:
            job_id, _, runtime, size = queue.pop(0)
            starts[job_id] = now
            free -= size
            heapq.heappush(ends, (now + runtime, size))
    return starts


def _random_jobs(n: int, seed: int) -> list[tuple[str, int, int, int]]:
    rng = random.Random(seed)
    t, jobs = 0, []
    for i in range(1, n + 1):
        t += rng.choice((0, 0, 1, 5, 30, 100))  # ties on purpose
        jobs.append((str(i), t, rng.choice((0, 1, 10, 50, 400)), rng.choice((1, 2, 4, 8, 16))))
    return jobs


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_fcfs_schedule_matches_an_independent_reference(seed: int) -> None:
    jobs = _random_jobs(3000, seed)
    specs = [JobSpec(j, JobKind.RIGID, s, s, s, submit_time=t, runtime=r) for j, t, r, s in jobs]
    result = simulate(specs, [Cluster("c", 16)], FCFS(), SimConfig(timeline=False))
    ours = {r.spec.id: r.start for r in result.records}
    assert ours == reference_fcfs(jobs, 16)


def test_fcfs_on_a_generated_trace_matches_the_reference(tmp_path: Path) -> None:
    bench = bench_sim.shared_bench(None)
    if bench is None:
        pytest.skip("shared/bench/gen_swf.py not found")
    trace = bench_sim.make_trace(bench, 2000, 3, tmp_path)
    specs = read_swf(trace).jobs
    result = simulate(specs, [Cluster("c", 128)], FCFS(), SimConfig(timeline=False))
    ours = {r.spec.id: r.start for r in result.records}
    reference = reference_fcfs([(s.id, int(s.submit_time), int(s.runtime or 0), s.min_size)
                                for s in specs], 128)
    assert ours == reference


def test_accasim_dispatching_plan_is_parsed_to_seconds_from_time_zero(tmp_path: Path) -> None:
    trace = tmp_path / "t.swf"
    (tmp_path / f"sched-{trace.name}").write_text(
        "3;-1;2001-09-09 01:50:00__6;1#7;1#__2001-09-09 01:51:49;2001-09-09 01:53:38;2;2;NA;164;\n"
        "1;-1;2001-09-09 01:46:40__0;1#__2001-09-09 01:46:40;2001-09-09 03:59:04;1;1;NA;11916;\n")
    starts = bench_sim.accasim_starts(tmp_path, trace)
    assert starts == {"3": 309.0, "1": 0.0}
    same, differ = bench_sim.compare_starts({"1": 0.0, "3": 309.0}, starts)
    assert (same, differ) == (2, [])
    same, differ = bench_sim.compare_starts({"1": 0.0, "3": 300.0, "4": 1.0}, starts)
    assert same == 1 and differ == ["job 3: ours 300.0, AccaSim 309.0",
                                    "job 4: ours 1.0, AccaSim None"]


def test_benchmark_runs_its_koala_part(capsys: pytest.CaptureFixture[str]) -> None:
    assert bench_sim.main(["--only", "koala"]) == 0
    out = capsys.readouterr().out
    assert out.count(" jobs ") == 8 and "jobs/s" in out


def test_benchmark_rigid_part_without_accasim(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    if bench_sim.shared_bench(None) is None:
        pytest.skip("shared/bench/gen_swf.py not found")
    assert bench_sim.main(["--only", "rigid", "--jobs", "500", "--no-accasim",
                           "--workdir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "ours (malleable simulate --policy fcfs, whole process)" in out
    assert "AccaSim skipped" in out
    for label in ("FIFO first fit", "EASY backfilling"):  # both output settings, timed
        assert f"| {label:<34} |" in out and f"| {label + ', per-job output':<34} |" in out
    assert "starts vs textbook reference: 500/500 identical (SAME)" in out


def test_accasim_that_cannot_install_is_skipped_with_a_message(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bench = tmp_path / "bench"
    (bench / "accasim").mkdir(parents=True)
    (bench / "accasim" / "requirements.lock.txt").write_text("accasim==1.1.3\n")
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    assert bench_sim.ensure_accasim(blocker / "venv", bench) is None  # venv cannot be made
    assert "SKIPPED AccaSim" in capsys.readouterr().out


def test_the_compiled_rows_say_their_cpu_share_and_whether_the_output_is_the_same() -> None:
    source, twin = bench_sim.Run(2.0, 1024), bench_sim.Run(1.5, 2048)
    row = bench_sim.compiled_twin("FIFO", 10, twin, source, True, "AccaSim", None)
    assert row.label == "FIFO [compiled]" and row.ours is twin and row.peer_name == "AccaSim"
    assert row.check == "0.750 of the source run's CPU; output SAME as the source run"
    differ = bench_sim.compiled_twin("EASY", 10, twin, source, False)
    assert differ.check.endswith("output DIFFERENT from the source run")
    assert bench_sim.compiled_twin("x", 1, None, source, None).check == "; output not compared"
