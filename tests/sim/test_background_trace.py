"""A real log replayed as local users' load (issue 39): the reader's oddity rules, the
sizing and window rule, the replay in a simulation and its summary, the CLI options."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from malleable.cli import main
from malleable.model import Cluster, JobKind, JobSpec
from malleable.policies.fcfs import FCFS
from malleable.sim.background import WEEK, TraceBackground
from malleable.sim.run import SimConfig, simulate
from malleable.workloads.reallog import (
    background_jobs,
    quantile_windows,
    read_log,
    window_loads,
)

HEADER = "; MaxNodes: 4 (dual CPU)\n; MaxProcs: 8\n"


def _line(job: int, submit: float, wait: float, run: float, procs: int, req: int = -1,
          status: int = 1) -> str:
    return (f"{job} {submit} {wait} {run} {procs} -1 -1 {req} 100 -1 {status} "
            "-1 -1 -1 -1 -1 -1 -1\n")


def _log(tmp_path: Path, lines: str, name: str = "log.swf.gz") -> Path:
    path = tmp_path / name
    with gzip.open(path, "wt") as handle:
        handle.write(HEADER + lines)
    return path


def test_reader_rules_for_real_oddities(tmp_path: Path) -> None:
    path = _log(tmp_path, _line(1, 100, 5, 50, 3) + _line(2, 110, -1, 20, -1, req=8)
                + _line(3, 120, 0, -1, 2) + _line(4, 130, 0, 0, 2) + _line(5, 140, 0, 10, -1)
                + _line(6, 150, 0, 30, 2, status=5))
    log = read_log(path)
    assert (log.nodes, log.procs_per_node, log.skipped) == (4, 2, 3)
    # times from the first submit; 3 processors on dual nodes are 2 nodes; a wait of -1 is
    # 0; requested processors (8) when none were allocated; a cancelled job that ran is kept
    assert [(j.submit, j.wait, j.runtime, j.nodes) for j in log.jobs] == [
        (0.0, 5.0, 50.0, 2), (10.0, 0.0, 20.0, 4), (50.0, 0.0, 30.0, 1)]


def test_reader_takes_allocated_first_and_reads_other_files_line_by_line(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    # field 5 (allocated, 2 processors: 1 node) before field 8 (requested, 8: 4 nodes)
    log = read_log(_log(tmp_path, _line(1, 0, 7, 10, 2, req=8)))
    assert [(j.wait, j.nodes) for j in log.jobs] == [(7.0, 1)]
    # a header the vectorized reader does not vouch for (not ASCII): read line by line,
    # without waits, the size of the one reader (field 8: 4 nodes)
    path = tmp_path / "odd.swf.gz"
    with gzip.open(path, "wt", encoding="utf-8") as handle:
        handle.write(HEADER + "; Note: caf\u00e9\n" + _line(1, 0, 7, 10, 2, req=8))
    with caplog.at_level("WARNING"):
        odd = read_log(path)
    assert [(j.wait, j.nodes) for j in odd.jobs] == [(0.0, 4)]
    assert "not a plain SWF log" in caplog.text


def test_reader_refuses_a_line_that_is_not_swf(tmp_path: Path) -> None:
    from malleable.errors import InputError

    with pytest.raises(InputError, match=r"log.swf.gz:3"):
        read_log(_log(tmp_path, "1 2 3\n"))
    # the one SWF reader's bounds (issue 39 item 2: reallog reads through swf.read_trace)
    with pytest.raises(InputError, match=r"log.swf.gz:3: submit time 1e\+20 .* is outside"):
        read_log(_log(tmp_path, _line(1, 1e20, 0, 5, 2)))
    with pytest.raises(InputError, match=r"log.swf.gz:3: run time .* is outside"):
        read_log(_log(tmp_path, _line(1, 0, 0, 2e9, 2)))
    with pytest.raises(InputError, match=r"log.swf.gz: a wait above"):
        read_log(_log(tmp_path, _line(1, 0, 5e9, 5, 2)))
    # absolute Unix submit times (as Theta's log has them) count from the first
    unix = read_log(_log(tmp_path, _line(1, 1641021254, 0, 5, 2) + _line(2, 1641021300, 0, 5, 2)))
    assert [j.submit for j in unix.jobs] == [0.0, 46.0]
    with pytest.raises(InputError, match="no jobs to simulate"):
        read_log(_log(tmp_path, _line(1, 0, 0, -1, 2)))
    with pytest.raises(InputError, match="no job that ran"):
        read_log(_log(tmp_path, _line(1, 0, 0, 0, 2)))


def test_window_rule_scales_sizes_and_keeps_the_state_at_its_start() -> None:
    jobs = ((0.0, 0.0, 100.0, 4), (10.0, 50.0, 20.0, 1), (30.0, 0.0, 5.0, 2),
            (80.0, 0.0, 10.0, 3), (2 * WEEK, 0.0, 7.0, 2))
    spec = TraceBackground(jobs, log_nodes=4, start=40.0)
    running, queue = spec.for_cluster(0, nodes=10)
    # job 0 runs 0-100: 60 s left; job 1 waits until 60: queued at 0; job 2 ended at 35
    assert running == [(60.0, 10)]
    assert queue == [(0.0, 20.0, 2), (40.0, 10.0, 8), (2 * WEEK - 40.0, 7.0, 5)]
    # site 1 replays a week later (round(2 * 10/4) = 5 nodes), at most the cluster's nodes
    assert spec.window(1) == 40.0 + WEEK
    running, queue = spec.for_cluster(1, nodes=3)
    assert running == [] and queue == [(WEEK - 40.0, 7.0, 2)]


def test_replay_takes_nodes_the_manager_sees_and_is_summarized() -> None:
    # the log's 4-node machine is full for 100 s from the window's start: on a cluster of 8
    # the local job takes all 8, so the manager's 1-node job waits until 100 s
    spec = TraceBackground(((0.0, 0.0, 100.0, 4), (500.0, 0.0, 1.0, 1)), 4, start=0.0)
    job = JobSpec("a", JobKind.RIGID, 1, 1, 1, submit_time=0.0, runtime=10.0)
    result = simulate([job], [Cluster("c", 8)], FCFS(), SimConfig(background_trace=spec))
    record = result.records[0]
    assert (record.start, record.end) == (100.0, 110.0)
    assert result.background["background_jobs"] == 1
    assert result.background["background_utilization"] == pytest.approx(800 / (8 * 110))
    # without the replay the job starts at once and there are no background figures
    empty = simulate([job], [Cluster("c", 8)], FCFS(), SimConfig())
    assert empty.records[0].start == 0.0 and empty.background == {}


def test_window_loads_and_quantiles() -> None:
    from malleable.workloads.reallog import LogJob, RealLog

    log = RealLog("x", (LogJob(0.0, 0.0, 3600.0, 2, 3600.0),
                        LogJob(7200.0, 0.0, 3600.0, 1, 3600.0),
                        LogJob(10800.0, 0.0, 1.0, 1, 1.0)), 2, 1, 0)
    loads = window_loads(log, 3600.0, step=3600.0)
    assert loads == [(0.0, 1.0), (3600.0, 0.0), (7200.0, 0.5)]
    assert quantile_windows(loads, (0.0, 0.5, 1.0)) == [(3600.0, 0.0), (7200.0, 0.5),
                                                        (0.0, 1.0)]
    assert background_jobs(log)[1] == (7200.0, 0.0, 3600.0, 1)


def test_simulate_cli_reports_the_background(tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    path = _log(tmp_path, "".join(_line(i, 600.0 * i, 0, 3000, 8) for i in range(1, 60)))
    assert main(["simulate", "--workload", "wm", "--background-trace", str(path),
                 "--background-window", "0", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["background_jobs"] > 0 and 0 < summary["background_utilization"] < 1
    assert main(["simulate", "--background-trace", str(path), "--background-window",
                 "-5"]) == 2
    assert "--background-window" in capsys.readouterr().err


@pytest.mark.slow
def test_koala_experiment_with_a_real_log(tmp_path: Path,
                                          capsys: pytest.CaptureFixture[str]) -> None:
    path = _log(tmp_path, "".join(_line(i, 3600.0 * i, 0, 1800, 2 * (i % 3 + 1))
                                  for i in range(1, 400)))
    out = tmp_path / "koala"
    assert main(["experiment", "koala", "--out", str(out), "--reps", "1", "--paper-only",
                 "--background-trace", str(path), "--background-window", "max",
                 "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["variants"] == ["paper", "real-max"]
    assert summary["simulations"] == 24
    assert set(summary["real_load"]) == {"real-max"}
    assert summary["real_load"]["real-max"]["background_utilization"] > 0
    report = (out / "report.md").read_text()
    assert "With a real log's users" in report and "| empty (paper setting) | real-max |" in report
    assert main(["experiment", "koala", "--out", str(out), "--background-trace", str(path),
                 "--background-window", "q150"]) == 2
