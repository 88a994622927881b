"""`experiment koala --sensitivity`: the conditions table, its figure and the worker pool."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from malleable.cli import main
from malleable.experiments.koala import experiment, sweep
from malleable.experiments.koala.findings import FINDINGS
from malleable.experiments.koala.runs import COMBOS, PAPER, plan, run_all, run_one


def test_verdicts_score_as_the_share_of_seed_comparisons_that_hold() -> None:
    assert sweep.score("holds") == 1.0 and sweep.score("does not hold") == 0.0
    assert sweep.score("partly (3/4 seed comparisons)") == 0.75
    assert sweep.score("partly (execution: holds; response: does not hold)") == 0.5
    row = {"paper": "does not hold", "a": "holds", "b": "partly (1/2 seed comparisons)",
           "c": "holds"}
    assert sweep.conditions(row) == "a, c"
    assert sweep.conditions({"paper": "does not hold"}) == "none of these"


def test_every_swept_level_is_labelled_tuning_and_the_paper_comes_first() -> None:
    assert all(v.tuning for v in sweep.SWEEP) and not PAPER.tuning
    names = [v.name for v in sweep.SWEEP]
    assert len(set(names)) == len(names) and "paper" not in names
    table = sweep.markdown(run_all(plan((1,), [PAPER]), (1,)), [PAPER])
    header = next(line for line in table if line.startswith("| # |"))
    assert header.split("|")[3].strip() == "paper"
    assert header.rstrip(" |").endswith("conditions under which it holds")


def test_a_faster_arrival_rate_divides_the_submit_times() -> None:
    fast = next(v for v in sweep.SWEEP if v.rate == 4.0)
    plain = PAPER.workload("wm", 1)
    quick = fast.workload("wm", 1)
    assert [j.submit_time / 4 for j in plain] == [j.submit_time for j in quick]


def test_the_pool_gives_the_same_runs_as_one_process() -> None:
    tasks = [(c, sweep.SWEEP[2], 1) for c in COMBOS[:3]]
    alone = run_all(tasks, (1,))
    pooled = run_all(tasks, (1,), workers=2)
    for combo in COMBOS[:3]:
        a, p = alone.of(combo, "latency-30")[0], pooled.of(combo, "latency-30")[0]
        assert a.summary == p.summary and a.decisions == p.decisions


def test_runs_count_grow_decisions_with_more_than_one_candidate() -> None:
    run = run_one(COMBOS[0], PAPER, 1)  # PRA, FPSMA, Wm
    assert run.decisions == {"grow_decisions": 300, "grow_decisions_multi": 0}


@pytest.mark.slow
def test_sensitivity_writes_the_conditions_table_and_figure(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    one = (next(v for v in sweep.SWEEP if v.name == "all-x8"),)
    monkeypatch.setattr(experiment, "SWEEP", one)
    monkeypatch.setattr(sweep, "SWEEP", one)
    out = tmp_path / "k"
    assert main(["experiment", "koala", "--out", str(out), "--seeds", "1", "--paper-only",
                 "--sensitivity", "--workers", "2", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["variants"] == ["paper", "all-x8"]
    assert summary["simulations"] == 24
    verdicts = summary["sensitivity"]["verdicts"]
    assert set(verdicts) == {f.key for f in FINDINGS}
    assert "paper" in summary["sensitivity"]["holds_under"]["C1"]
    text = (out / "sensitivity.md").read_text()
    assert "| all-x8 | tuning |" in text and "conditions under which it holds" in text
    assert (out / "sensitivity.png").stat().st_size > 10_000


def test_bad_worker_count_is_an_input_error(tmp_path: Path,
                                            capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["experiment", "koala", "--out", str(tmp_path), "--workers", "0"]) == 2
    assert "--workers 0" in capsys.readouterr().err
