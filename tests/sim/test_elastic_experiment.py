"""``experiment elastic`` (issue 39): the rule that makes jobs malleable, the summary's
places against the paper's ranges, and a smoke run on a small log."""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path

import pytest

from malleable.apps import standard_catalog
from malleable.cli import main
from malleable.experiments.elastic.experiment import summarize
from malleable.experiments.elastic.workload import convert, serial_fraction
from malleable.model import JobKind
from malleable.workloads.reallog import LogJob


def _jobs(n: int = 20) -> list[LogJob]:
    return [LogJob(60.0 * i, 0.0, 600.0, 1 + i % 8, 900.0) for i in range(n)]


def test_rule_sizes_speedup_and_choice() -> None:
    jobs = _jobs()
    specs = convert(jobs, machine=10, fraction=0.5, seed=3)
    malleable = [s for s in specs if s.kind is JobKind.MALLEABLE]
    assert len(malleable) == 10
    assert convert(jobs, 10, 0.5, 3) == specs  # the seed decides
    assert convert(jobs, 10, 0.5, 4) != specs
    catalog = standard_catalog()
    for spec, job in zip(specs, jobs, strict=True):
        assert spec.walltime == 900.0
        if spec.kind is JobKind.RIGID:
            assert spec.min_size == spec.max_size == job.nodes and spec.runtime == 600.0
            continue
        p = job.nodes
        assert (spec.min_size, spec.initial_size, spec.preferred_size) == (
            math.ceil(p / 2), math.ceil(p / 2), p)
        assert spec.max_size == min(2 * p, 10)
        curve = catalog.time_model(spec)
        assert curve(p) == pytest.approx(600.0)  # the logged time at the logged size
        if p > 1:  # 50% efficient at p: twice the nodes is 4(p-1)/(3p-2) faster (-> 4/3)
            assert serial_fraction(p) == pytest.approx(1 / (p - 1))
            assert curve(1) / curve(p) / p == pytest.approx(0.5)
            if 2 * p <= 10:
                assert curve(p) / curve(2 * p) == pytest.approx(4 * (p - 1) / (3 * p - 2))
    assert all(s.kind is JobKind.RIGID for s in convert(jobs, 10, 0.0, 1))
    assert all(s.malleable for s in convert(jobs, 10, 1.0, 1))


def _row(policy: str, fraction: float, seed: int, value: float) -> dict[str, float | str]:
    return {"policy": policy, "fraction": fraction, "seed": seed, "jobs": 1, "completed": 1,
            "turnaround": value, "wait": value, "makespan": value,
            "utilization": 2 * value / 100, "node_seconds": value, "last_submit": 0.0,
            "malleable": 1, "grows": 0, "shrinks": 0}


def test_summary_places_the_best_policy_against_the_paper() -> None:
    rows = [_row("easy-rigid", 0.0, 1, 100.0), _row("a", 1.0, 1, 50.0),
            _row("a", 1.0, 2, 30.0), _row("b", 1.0, 1, 90.0), _row("b", 1.0, 2, 90.0)]
    summary = summarize(rows, [100.0], ["a", "b"], [1, 2])  # type: ignore[arg-type]
    a = summary["results"]["a"]["100"]["turnaround"]
    assert (a["change"], a["min"], a["max"]) == (-60.0, -70.0, -50.0)
    best = summary["best"]["100"]
    assert best["turnaround"]["policy"] == "a"
    assert best["turnaround"]["place"] == "inside"  # -60 in [-67, -37]
    assert best["wait"]["place"].startswith("below")  # -60: a smaller gain than -73
    assert best["utilization"]["policy"] == "b"  # the gain: up for utilization
    assert best["utilization"]["place"].startswith("below")  # -10%


@pytest.mark.slow
def test_elastic_smoke_on_a_small_log(tmp_path: Path,
                                      capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "small.swf.gz"
    with gzip.open(log, "wt") as handle:
        handle.write("; MaxNodes: 16\n; MaxProcs: 16\n")
        for i in range(120):
            handle.write(f"{i + 1} {i * 600} 0 {1800 + 60 * (i % 7)} {2 + i % 9} -1 -1 "
                         f"{2 + i % 9} 3600 -1 1 -1 -1 -1 -1 -1 -1 -1\n")
    out = tmp_path / "elastic"
    assert main(["experiment", "elastic", "--out", str(out), "--trace", str(log),
                 "--slice-start", "0", "--slice-days", "1", "--reps", "2",
                 "--policies", "easy-minimum,dmr,fpsma-pwa,egs-pra-cap2,acds",
                 "--malleable-fraction", "0,100", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["jobs"] == 120 and summary["nodes"] == 16
    # the baseline, then every policy at 0% (one seed) and at 100% (two seeds)
    assert summary["policies"] == ["easy-minimum", "dmr", "fpsma-pwa", "egs-pra-cap2", "acds"]
    assert summary["simulations"] == 1 + 5 + 2 * 5
    for name in ("report.md", "summary.json", "elastic_changes.png", "elastic_wait.png"):
        assert (out / name).stat().st_size > 1000, name
    report = (out / "report.md").read_text()
    assert "| mean wait | -99% to -73% |" in report
    assert all(summary["results"][p]["100"]["completed"] == 120 for p in summary["policies"])
    assert main(["experiment", "elastic", "--out", str(out), "--trace", str(log),
                 "--malleable-fraction", "0,120"]) == 2
    assert main(["experiment", "elastic", "--out", str(out), "--trace", str(log),
                 "--policies", "nope"]) == 2


def test_full_size_range() -> None:
    jobs = _jobs()
    specs = convert(jobs, machine=10, fraction=1.0, seed=3, size_range="full")
    catalog = standard_catalog()
    for spec, job in zip(specs, jobs, strict=True):
        assert (spec.min_size, spec.initial_size, spec.max_size) == (1, 1, 10)
        assert spec.preferred_size == job.nodes
        assert catalog.time_model(spec)(job.nodes) == pytest.approx(600.0)
    with pytest.raises(ValueError):
        convert(jobs, 10, 1.0, 3, size_range="wide")


@pytest.mark.slow
def test_elastic_on_a_lublin_log_against_fcfs(tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "lublin"
    assert main(["experiment", "elastic", "--out", str(out), "--lublin", "150",
                 "--lublin-nodes", "32", "--lublin-seed", "4", "--size-range", "full",
                 "--baseline", "fcfs", "--policies", "easy-largest,fpsma-pra-cap2",
                 "--malleable-fraction", "100", "--reps", "1", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["baseline_policy"] == "fcfs-rigid" and summary["size_range"] == "full"
    assert summary["jobs"] == 150 and summary["nodes"] == 32
    assert (out / "lublin-150-seed4.swf").exists()
    assert summary["baseline"]["completed"] == 150
    report = (out / "report.md").read_text()
    assert "- **Baseline**: FCFS on the rigid log" in report
    assert "`--size-range full`" in report
    assert main(["experiment", "elastic", "--out", str(out)]) == 2  # no log
    assert main(["experiment", "elastic", "--out", str(out), "--lublin", "10",
                 "--trace", "x.swf"]) == 2
