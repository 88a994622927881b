"""Every experiment writes ``summary.json`` (docs/experiments.md); DMRlib and CooRM also keep
writing it under its older name ``results.json``, with the same content."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from malleable.cli import main

SMALL = {
    "dmrlib": ["--quick"],
    "coorm": ["--quick"],
    "acds": ["--quick"],
    "koala": ["--reps", "1", "--no-sensitivity"],
}
LEGACY = {"dmrlib", "coorm"}


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.slow) if n == "koala"
                                  else n for n in SMALL])
def test_every_experiment_writes_summary_json(name: str, tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / name
    assert main(["experiment", name, "--out", str(out), *SMALL[name]]) == 0
    capsys.readouterr()
    summary = json.loads((out / "summary.json").read_text())
    assert isinstance(summary, dict) and summary
    if name in LEGACY:
        assert (out / "results.json").read_text() == (out / "summary.json").read_text()
    else:
        assert not (out / "results.json").exists()


def test_dmrlib_sizes_and_its_hidden_older_name_jobs(tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    for flag in ("--sizes", "--jobs"):
        out = tmp_path / flag.strip("-")
        assert main(["experiment", "dmrlib", "--out", str(out), flag, "12", "16",
                     "--table7-jobs", "12", "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["sizes"] == [12, 16]
    with pytest.raises(SystemExit):
        main(["experiment", "dmrlib", "--help"])
    text = capsys.readouterr().out
    assert "--sizes" in text and "--jobs" not in text


@pytest.mark.parametrize(("name", "words"), [
    ("koala", ["--reps", "with seeds --seed..--seed+N-1", "--seed", "the first run's seed"]),
    ("dmrlib", ["--reps", "workloads drawn per size, with seeds --seed..--seed+N-1",
                "--sizes", "in jobs"]),
    ("acds", ["--job-counts", "FIRST to LAST by STEP", "--workers", "(default 1)"]),
    ("coorm", ["--jobs-per-pack", "jobs per pack", "--workers", "(default 1)"]),
])
def test_help_says_what_each_shared_option_name_means_here(
        name: str, words: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["experiment", name, "--help"])
    text = " ".join(capsys.readouterr().out.split())
    # argparse wraps help at hyphens too ("--seed..--" / "seed+N-1"): compare without spaces
    bare = "".join(text.split())
    for word in words:
        assert "".join(word.split()) in bare, word
    # the names that meant different things per experiment are no longer shown anywhere
    for hidden in ("--seeds", "--jobs "):
        assert hidden not in text, hidden
