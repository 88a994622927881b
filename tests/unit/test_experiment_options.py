"""Each experiment's ``options`` module (what ``--help`` loads) names some defaults of its
runs without importing them: those copies must stay equal to the runs' own."""

from __future__ import annotations

import argparse
import importlib

import pytest

from malleable.commands.experiment import options_module
from malleable.experiments import EXPERIMENTS


def test_acds_work_scale_default_is_downeys() -> None:
    from malleable.experiments.acds.options import DEFAULT_WORK_SCALE
    from malleable.sim.quantum.jobs import DowneyParams

    assert DowneyParams().work_scale == DEFAULT_WORK_SCALE


def test_elastic_policy_keys_are_the_runs_policies() -> None:
    from malleable.experiments.elastic.options import POLICY_KEYS
    from malleable.experiments.elastic.runs import POLICIES

    assert tuple(p.key for p in POLICIES) == POLICY_KEYS


def test_elastic_baseline_keys_are_the_runs_baselines() -> None:
    from malleable.experiments.elastic.options import BASELINE_KEYS
    from malleable.experiments.elastic.runs import BASELINES

    assert tuple(BASELINES) == BASELINE_KEYS


@pytest.mark.parametrize("name", sorted(EXPERIMENTS))
def test_the_runs_module_takes_the_options_it_is_given(name: str) -> None:
    """``experiment.add_arguments`` (kept for callers of the runs' module) is the options'."""
    runs = importlib.import_module(EXPERIMENTS[name][0])
    options = importlib.import_module(options_module(name))
    assert runs.add_arguments is options.add_arguments
    parser = argparse.ArgumentParser()
    options.add_arguments(parser)
    assert parser.parse_args(["--out", "x", *(["--trace", "t"] if name == "elastic" else [])])
