"""Bring-up and take-down from the command line, with a job still running at take-down."""

from __future__ import annotations

from pathlib import Path

import pytest

from malleable.cli import main
from malleable.testbed import Docker, Testbed
from tests.fakes.waits import unique_name, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]


def _leftovers(docker: Docker, project: str) -> list[str]:
    label = f"label=com.docker.compose.project={project}"
    found = docker.docker_cmd("ps", "--all", "--quiet", "--filter", label).stdout.split()
    found += docker.docker_cmd("volume", "ls", "--quiet", "--filter", label).stdout.split()
    return found + docker.docker_cmd("network", "ls", "--quiet", "--filter",
                                     label).stdout.split()


def test_cli_up_then_down_leaves_nothing_behind(docker_engine: Docker, tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    topo = tmp_path / "one.toml"
    topo.write_text("[sites.solo]\nnodes = 3\n")
    state = tmp_path / "state"
    monkeypatch.setenv("MALLEABLE_TESTBED_STATE", str(state))
    name = unique_name("life")
    tb = Testbed(name, root=state, docker=docker_engine)
    try:
        assert main(["testbed", "up", "--topology", str(topo), "--name", name]) == 0
        assert "solo" in capsys.readouterr().out
        assert (state / name / "secrets" / "munge.key").is_file()
        job = tb.exec("solo", ["sbatch", "--parsable", "--nodes=3", "--wrap", "srun sleep 600"],
                      user="malleable", check=True).stdout.strip()
        wait_for(lambda: tb.status().sites["solo"].node_states == {"allocated": 3}, 30,
                 f"job {job} to run on all three nodes")
        # bringing the same testbed up again is a no-op health check
        assert main(["testbed", "up", "--topology", str(topo), "--name", name]) == 0
        assert main(["testbed", "up", "--topology", "small", "--name", name]) == 2
        assert "already up with topology 'one'" in capsys.readouterr().err
    finally:
        assert main(["testbed", "down", "--name", name]) == 0
    assert _leftovers(docker_engine, tb.project) == []
    assert not (state / name).exists()
