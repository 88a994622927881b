"""Each meaning of the experiments' options has its own name (issue 19); the older spellings,
which meant different things per experiment, keep working as hidden aliases."""

from __future__ import annotations

import argparse

import pytest

from malleable.cli import build_parser

# (experiment, new spelling, older spelling, value)
ALIASES = [
    ("koala", ["--reps", "3"], ["--seeds", "3"]),
    ("dmrlib", ["--reps", "3"], ["--seeds", "3"]),
    ("dmrlib", ["--sizes", "12", "16"], ["--jobs", "12", "16"]),
    ("acds", ["--job-counts", "20:100:20"], ["--jobs", "20:100:20"]),
    ("coorm", ["--jobs-per-pack", "30"], ["--jobs", "30"]),
]


def _parse(name: str, extra: list[str]) -> argparse.Namespace:
    argv = ["experiment", name, "--out", "/tmp/x", *extra]
    args = build_parser("experiment").parse_args(argv)
    return args


@pytest.mark.parametrize(("name", "new", "old"), ALIASES)
def test_the_older_spelling_parses_to_the_same_options(name: str, new: list[str],
                                                        old: list[str]) -> None:
    default = vars(_parse(name, []))
    by_new, by_old = vars(_parse(name, new)), vars(_parse(name, old))
    by_new.pop("func", None), by_old.pop("func", None), default.pop("func", None)
    assert by_new == by_old
    assert by_new != default  # the option did change something


@pytest.mark.parametrize(("name", "new", "old"), ALIASES)
def test_the_older_spelling_is_hidden(name: str, new: list[str], old: list[str],
                                      capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        build_parser("experiment").parse_args(["experiment", name, "--help"])
    text = capsys.readouterr().out
    assert new[0] in text
    assert f"{old[0]} " not in text and f"{old[0]}\n" not in text


@pytest.mark.parametrize("name", ["koala", "dmrlib"])
def test_reps_runs_seeds_from_seed(name: str) -> None:
    args = _parse(name, ["--seed", "5", "--reps", "2"])
    assert (args.seed, args.reps) == (5, 2)


def test_workers_default_to_one_process_everywhere() -> None:
    for name in ("acds", "coorm"):
        assert _parse(name, []).workers == 1, name
