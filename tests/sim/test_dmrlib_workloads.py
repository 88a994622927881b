"""The study's workloads: Table 3 and 6 versions, mixes, Feitelson draws and SWF traces."""

from __future__ import annotations

from malleable.model import JobKind
from malleable.policies.easy import submission_range
from malleable.workloads.dmrlib import (
    ALL,
    NONE,
    TABLE7_MIXES,
    Mix,
    Submission,
    Version,
    build,
    draw,
    from_trace,
    job_spec,
)
from malleable.workloads.dmrlib_apps import APPS, CG, HPG
from malleable.workloads.swf import parse_swf


def test_table_3_and_6_versions_of_each_application() -> None:
    for app in APPS:
        fixed = job_spec(app, Version.FIXED, "f", 0.0)
        mold = job_spec(app, Version.PURE_MOLDABLE, "m", 0.0)
        mall = job_spec(app, Version.PURE_MALLEABLE, "p", 0.0)
        flex = job_spec(app, Version.FLEXIBLE, "x", 0.0)
        assert (fixed.kind, mold.kind, mall.kind, flex.kind) == (
            JobKind.RIGID, JobKind.MOLDABLE, JobKind.MALLEABLE, JobKind.MALLEABLE)
        # Table 6: rigid at the upper limit, moldable between the limits
        assert submission_range(fixed) == submission_range(mall) == (app.upper, app.upper)
        assert submission_range(mold) == submission_range(flex) == (app.lower, app.upper)
        assert mall.preferred_size == flex.preferred_size == app.preferred
        # wall time: exact for fixed jobs, the time at the lower limit otherwise
        assert fixed.walltime == app.time(app.upper)
        assert mold.walltime == flex.walltime == mall.walltime == app.time(app.lower)


def test_versions_map_to_submission_and_malleability() -> None:
    for version in Version:
        assert Version.of(version.malleable, version.submission) is version


def test_the_four_versions_share_arrivals_and_applications() -> None:
    d = draw(50, seed=3)
    built = [build(d, sub, mix) for sub in Submission for mix in (NONE, ALL)]
    for specs in built:
        assert [(s.id, s.submit_time, s.app) for s in specs] == [
            (s.id, s.submit_time, s.app) for s in built[0]]
    assert built[0][0].submit_time == 0.0
    assert {s.app for s in built[0]} == {a.model for a in APPS}


def test_fraction_mixes_are_exact_and_nested() -> None:
    d = draw(200, seed=5)
    chosen = {}
    for mix in TABLE7_MIXES[:4]:
        specs = build(d, Submission.RIGID, mix)
        chosen[mix.name] = {s.id for s in specs if s.kind is JobKind.MALLEABLE}
    assert [len(chosen[m]) for m in ("none", "25%", "50%", "75%")] == [0, 50, 100, 150]
    assert chosen["25%"] < chosen["50%"] < chosen["75%"]


def test_one_application_mixes() -> None:
    d = draw(80, seed=2)
    specs = build(d, Submission.MOLDABLE, Mix("CG", app="CG"))
    assert all((s.kind is JobKind.MALLEABLE) == (s.app == CG.model) for s in specs)
    assert any(s.kind is JobKind.MALLEABLE for s in specs)


def test_traces_give_arrivals_and_clamped_sizes() -> None:
    lines = ["; a trace", "7 100 -1 50 64 -1 -1 64 -1 -1 -1 -1 -1 -1 -1 -1 -1 -1",
             "8 160 -1 50 1 -1 -1 -1 -1 -1 -1 -1 -1 -1 -1 -1 -1 -1",
             "9 200 -1 50 8 -1 -1 8 -1 -1 -1 -1 -1 -1 -1 -1 -1 -1"]
    d = from_trace(parse_swf(lines), None, seed=1)
    assert d.submits == (0.0, 60.0, 100.0)
    assert d.uppers is not None
    for upper, app, size in zip(d.uppers, d.apps, (64, 1, 8), strict=True):
        assert upper == min(max(size, app.lower), app.upper)
    specs = build(d, Submission.RIGID, NONE)
    assert [s.max_size for s in specs] == list(d.uppers)
    assert len(from_trace(parse_swf(lines), 2, seed=1)) == 2


def test_a_trace_job_smaller_than_hpg_lower_limit() -> None:
    spec = job_spec(HPG, Version.FLEXIBLE, "h", 0.0, upper=6)
    assert (spec.min_size, spec.max_size, spec.preferred_size) == (6, 6, 6)
    spec = job_spec(CG, Version.FLEXIBLE, "c", 0.0, upper=8)
    assert (spec.min_size, spec.max_size, spec.preferred_size) == (2, 8, 8)
