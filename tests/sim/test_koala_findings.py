"""The paper's qualitative findings that hold in our model for every seed (1-4), and
the ones that do not, as the experiment reports them (paper setting)."""

from __future__ import annotations

import pytest

from malleable.experiments.koala import stats as st
from malleable.experiments.koala.findings import FINDINGS, evaluate, verdict
from malleable.experiments.koala.runs import (
    BASELINE,
    FIG7,
    FIG8,
    PAPER,
    Results,
    baseline_of,
    plan,
    run_all,
)

SEEDS = (1, 2, 3, 4)
PRA_FPSMA_WM, PRA_EGS_WM, PRA_FPSMA_WMR, PRA_EGS_WMR = FIG7


@pytest.fixture(scope="module")
def results() -> Results:
    return run_all(plan(SEEDS, (PAPER,)), SEEDS)


def _each_seed(results: Results, metric: st.Metric, a: object, b: object) -> list[tuple]:
    return list(zip(st.per_seed(results.of(a), metric), st.per_seed(results.of(b), metric),
                    strict=True))  # type: ignore[arg-type]


def test_wm_gives_shorter_response_times_than_wmr(results: Results) -> None:
    for wm, wmr in ((PRA_FPSMA_WM, PRA_FPSMA_WMR), (PRA_EGS_WM, PRA_EGS_WMR)):
        for a, b in _each_seed(results, st.mean_resp, wm, wmr):
            assert a < b


def test_wm_has_many_more_grow_operations_and_a_higher_utilization_than_wmr(
        results: Results) -> None:
    for wm, wmr in ((PRA_FPSMA_WM, PRA_FPSMA_WMR), (PRA_EGS_WM, PRA_EGS_WMR)):
        for a, b in _each_seed(results, st.grows, wm, wmr):
            assert a >= 1.5 * b
        for a, b in _each_seed(results, st.util, wm, wmr):
            assert a > b


def test_under_wmr_few_malleable_jobs_keep_their_initial_size(results: Results) -> None:
    for combo in (PRA_FPSMA_WMR, PRA_EGS_WMR):
        assert all(v < 0.25 for v in st.per_seed(results.of(combo), st.stuck))


def test_malleability_beats_the_no_malleability_baseline(results: Results) -> None:
    for combo in FIG7 + FIG8:
        for a, b in _each_seed(results, st.mean_resp, combo, baseline_of(combo)):
            assert a < b


def test_fpsma_and_egs_coincide_under_pra_so_the_egs_findings_do_not_reproduce(
        results: Results) -> None:
    outcomes = evaluate(results)
    for key in ("A2", "A3", "A7", "A10"):
        assert outcomes[key].verdict == "does not hold"
        assert "identical in every seed" in outcomes[key].numbers
    for combo in FIG7:
        assert all(v == 0 for v in st.per_seed(results.of(combo), st.shared))


def test_every_finding_evaluates_with_numbers_for_its_runs(results: Results) -> None:
    outcomes = evaluate(results)
    assert set(outcomes) == {f.key for f in FINDINGS}
    for key, outcome in outcomes.items():
        assert outcome.verdict, key
        assert outcome.values, key
        assert all(v == v for v in outcome.values.values()), key  # no NaN
    assert outcomes["C1"].verdict == "holds"
    assert outcomes["A6"].verdict == "holds"
    assert {b.key for b in BASELINE} <= set(outcomes["C1"].values)


def test_verdict_words() -> None:
    assert verdict([True, True]) == "holds"
    assert verdict([False, False]) == "does not hold"
    assert verdict([True, False, True]) == "partly (2/3)"
    assert verdict([]) == "does not hold"
