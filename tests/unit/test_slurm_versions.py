"""The adapter's parsers on the recorded output of Slurm 22.05, 24.11 and 26.05 (the scenario
of tests/integration/test_slurm_versions.py: a job shrunk then grown through the expand
protocol, another user's job, a pending job)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from malleable.adapters.slurm.parse import ParseError, parse_version, version_tuple
from malleable.testbed.versions import SUITES
from tests.fakes.slurm_versions import check_outputs

DATA = Path(__file__).resolve().parents[1] / "data" / "slurm"


def _outputs(version: str) -> dict[str, str]:
    return {p.name: p.read_text() for p in (DATA / version).iterdir()}


@pytest.mark.parametrize("version", list(SUITES))
def test_recorded_output_of_each_version_parses_to_the_same_facts(version: str) -> None:
    assert check_outputs(_outputs(version)).startswith(version + ".")


@pytest.mark.parametrize(("version", "wrapped"), [("22.05", False), ("24.11", True),
                                                  ("26.05", True)])
def test_the_json_shapes_differ_between_versions(version: str, wrapped: bool) -> None:
    """22.05 writes plain numbers and a state string, and sinfo lists nodes; 24.11 and
    later wrap numbers in {set, infinite, number}, list states, and group sinfo by state."""
    job = json.loads(_outputs(version)["squeue.json"])["jobs"][0]
    assert isinstance(job["node_count"], dict) is wrapped
    assert isinstance(job["job_state"], list) is wrapped
    sinfo = json.loads(_outputs(version)["sinfo_busy.json"])
    assert ("sinfo" in sinfo) is wrapped and ("nodes" in sinfo) is not wrapped


def test_parse_version() -> None:
    assert parse_version("slurm 22.05.8\n") == "22.05.8"
    assert parse_version("slurm-wlm 26.05.5\n") == "26.05.5"
    assert version_tuple("24.11.5") == (24, 11, 5) > version_tuple("22.05.8")
    with pytest.raises(ParseError, match="not a Slurm version"):
        parse_version("sinfo: error: x")
    with pytest.raises(ParseError):
        version_tuple("24.x")
