"""benchmarks/bench_abuse.py runs (a small flood: the figures come from the full run)."""

from __future__ import annotations

from benchmarks.bench_abuse import run


def test_the_abuse_benchmark_measures_both_phases() -> None:
    report = run(idle=120, bad=40, cycles=8, period=0.05, unmunge_ms=5.0)
    assert len(report.baseline.cycles) == 8 and len(report.flood.cycles) >= 8
    assert report.idle_held == 120 and report.bad_sent > 0
    assert report.dropped.get("over_peer_cap", 0) > 0 and report.threads_peak < 20
    assert report.rss_peak >= report.rss_before > 0
