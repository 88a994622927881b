"""The Lublin-Feitelson generator's distributions (statistical, seeded, bounded).

60,000 jobs of seed 7 on 128 nodes: each bound is at least 3 standard errors of the
statistic from the model's value (the standard error is given beside each bound)."""

from __future__ import annotations

import itertools
import math
import statistics
from functools import lru_cache

import numpy as np
import pytest

from malleable.workloads import lublin
from malleable.workloads.reallog import read_log

N = 60_000


@lru_cache(maxsize=1)
def sample() -> tuple[lublin.ModelJob, ...]:
    return tuple(lublin.generate(N, 128, seed=7))


def test_seeded_and_bounded() -> None:
    first = lublin.generate(500, 128, seed=3)
    assert first == lublin.generate(500, 128, seed=3)
    assert first != lublin.generate(500, 128, seed=4)
    jobs = sample()
    assert all(1 <= j.nodes <= 128 for j in jobs)
    assert all(1 <= j.runtime <= math.exp(lublin.MAX_LOG_RUNTIME) + 1 for j in jobs)
    assert all(b.submit >= a.submit for a, b in itertools.pairwise(jobs))
    with pytest.raises(ValueError):
        lublin.generate(0)
    with pytest.raises(ValueError):
        lublin.generate(10, classes="three")


def test_gamma_cdf() -> None:
    for x in (0.1, 1.0, 3.0, 20.0):  # shape 1 is the exponential
        assert lublin.gamma_cdf(x, 1.0, 2.0) == pytest.approx(1 - math.exp(-x / 2), rel=1e-9)
    # shape 2, scale 1: 1 - e^-x (1 + x)
    assert lublin.gamma_cdf(3.0, 2.0, 1.0) == pytest.approx(1 - math.exp(-3) * 4, rel=1e-9)
    weights = lublin.cycle_weights(8.1737, 3.9631)
    assert len(weights) == 48 and statistics.fmean(weights) == pytest.approx(1.0)


def test_sizes() -> None:
    jobs, model = sample(), lublin.WHOLE
    serial = sum(j.nodes == 1 for j in jobs) / N  # se 0.0018
    assert serial == pytest.approx(model.serial, abs=0.008)
    parallel = [j.nodes for j in jobs if j.nodes > 1]
    pow2 = sum(n & (n - 1) == 0 for n in parallel) / N
    # rounded draws (pow2 of all jobs) and unrounded ones that land on a power of two
    assert model.pow2 - 0.01 <= pow2 <= model.pow2 + 0.08
    # unrounded sizes of the upper stage are log-uniform on [umed, uhi] = [4.5, 7]:
    # mean log2 5.75 (se 0.015)
    upper = [math.log2(n) for n in parallel if n & (n - 1) and n > 2 ** 4.5]
    assert statistics.fmean(upper) == pytest.approx((4.5 + 7.0) / 2, abs=0.1)
    share_low = sum(n <= 2 ** 4.5 for n in parallel) / len(parallel)  # se 0.002
    assert share_low == pytest.approx(model.uprob, abs=0.03)


def test_runtimes_hyper_gamma_and_correlation() -> None:
    jobs, m = sample(), lublin.WHOLE
    logs = [math.log(j.runtime) for j in jobs]
    ps = [min(1.0, max(0.0, m.pa * j.nodes + m.pb)) for j in jobs]
    expected = statistics.fmean(p * m.a1 * m.b1 + (1 - p) * m.a2 * m.b2 for p in ps)
    assert statistics.fmean(logs) == pytest.approx(expected, abs=0.1)  # se 0.012
    small = [x for x, j in zip(logs, jobs, strict=True) if j.nodes == 1]
    large = [x for x, j in zip(logs, jobs, strict=True) if j.nodes >= 64]
    assert statistics.fmean(large) > statistics.fmean(small) + 1.0  # p falls with size


def test_arrivals_mean_and_daily_cycle() -> None:
    jobs, m = sample(), lublin.WHOLE
    a, b = m.aarr * m.arar, m.barr
    x = np.linspace(1e-9, lublin.MAX_LOG_INTERARRIVAL, 100_001)
    pdf = np.exp((a - 1) * np.log(x) - x / b - math.lgamma(a) - a * math.log(b))
    mean = float(np.trapezoid(np.exp(x) * pdf, x) / np.trapezoid(pdf, x))  # 911 s
    measured = jobs[-1].submit / (N - 1)  # se about 29 s
    assert measured == pytest.approx(mean, rel=0.1)
    weights = lublin.cycle_weights(m.anum, m.bnum)
    day = [int(j.submit % 86400 // 1800) for j in jobs]
    busy = range(20, 36)  # 10:00-18:00
    share = sum(b in busy for b in day) / N  # se 0.002
    assert share == pytest.approx(sum(weights[b] for b in busy) / 48, abs=0.02)
    assert share > 0.45  # the afternoon peak: 1/3 of the day holds about half the jobs


def test_two_classes_and_swf(tmp_path) -> None:  # type: ignore[no-untyped-def]
    jobs = lublin.generate(4000, 128, seed=2, classes="two")
    kinds = {j.kind for j in jobs}
    assert kinds == {"batch", "interactive"}
    assert max(j.nodes for j in jobs if j.kind == "interactive") <= round(2 ** 5.5)
    path = lublin.write_swf(tmp_path / "l.swf", 300, nodes=64, seed=5)
    log = read_log(path)
    assert log.nodes == 64 and len(log.jobs) == 300
    made = lublin.generate(300, 64, seed=5)
    assert [j.nodes for j in log.jobs] == [j.nodes for j in made]
    assert log.jobs[-1].submit == round(made[-1].submit) - round(made[0].submit)
