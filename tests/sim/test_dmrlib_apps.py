"""The study's four applications: Table 5 follows from our curves by the paper's rule."""

from __future__ import annotations

import pytest

from malleable.apps import relative_time, standard_catalog
from malleable.model import JobKind, JobSpec
from malleable.workloads.dmrlib_apps import (
    APPS,
    CAP,
    CG,
    HPG,
    JACOBI,
    NBODY,
    App,
    app_named,
    gain_differences,
    malleability_parameters,
)

TABLE5 = {"CG": (2, 32, 16), "Jacobi": (2, 32, 4), "N-body": (1, 32, 1), "HPG-aligner": (6, 12, 6)}


@pytest.mark.parametrize("app", APPS, ids=lambda a: a.label)
def test_the_gain_difference_rule_gives_table_5(app: App) -> None:
    assert malleability_parameters(app.table, CAP) == TABLE5[app.label]
    assert (app.lower, app.upper, app.preferred) == TABLE5[app.label]


def test_the_rule_on_a_hand_made_table() -> None:
    table = ((1, 1.0), (2, 0.85), (4, 0.7), (8, 0.65), (16, 0.7))
    assert [round(s) for _, s in gain_differences(table)] == [15, 15, 5, -5]
    assert malleability_parameters(table, 32) == (2, 8, 4)
    assert malleability_parameters(((1, 1.0), (2, 0.97)), 32) == (1, 2, 1)  # never reaches 10%


def test_shapes_described_in_section_5_3() -> None:
    assert CG.time(16) < CG.time(8) * 0.6  # CG still scales well up to 16
    assert JACOBI.time(32) > JACOBI.time(4) * 0.8  # Jacobi hardly gains beyond 4
    assert NBODY.time(32) > NBODY.time(1) * 0.8  # N-body hardly scales
    assert HPG.time(24) > HPG.time(12)  # HPG-aligner gets slower past 12


def test_interpolation_between_tabulated_sizes() -> None:
    table = CG.table
    assert relative_time(table, 4) == 0.40
    assert 0.40 > relative_time(table, 6) > 0.26
    assert relative_time(table, 64) == table[-1][1]
    assert relative_time(((3, 1.0), (6, 0.8)), 1) == pytest.approx(3.0)
    with pytest.raises(ValueError):
        relative_time(table, 0)


def test_curves_are_in_the_standard_catalog() -> None:
    catalog = standard_catalog()
    for app in APPS:
        assert catalog.known(app.model)
        spec = JobSpec("x", JobKind.MALLEABLE, app.lower, app.upper, app.lower, app=app.model)
        assert catalog.time_model(spec)(app.upper) == app.time(app.upper)


def test_application_names() -> None:
    assert app_named("nbody") is NBODY and app_named("HPG") is HPG and app_named("dmr-cg") is CG
    with pytest.raises(ValueError, match="valid: cg, jacobi"):
        app_named("lammps")
