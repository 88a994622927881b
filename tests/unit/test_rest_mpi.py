"""``--mpi`` jobs and REST sites: declared absent (the ``MPI`` capability), refused at
submission and at the channel's registration with one line saying why."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from malleable.adapters.slurm.cluster import SlurmCluster
from malleable.adapters.slurm.payload import Payload
from malleable.adapters.slurm.rest import NO_MUNGE, RestCtl
from malleable.adapters.slurm.sites import rest_ctl
from malleable.cli import main
from malleable.clock import ScaledClock
from malleable.config import parse_config
from malleable.resources import Capability
from malleable.site.channel import unmunge
from tests.unit.test_submit_rest import FakeRest, _config, _jwt


def _rest_ctl(tmp_path: Path, version: tuple[int, int, int]) -> RestCtl:
    token = tmp_path / "t.jwt"
    token.write_text(_jwt("malleable", time.time() + 600))
    site = parse_config({"clusters": {"vu": {"transport": "rest", "url": "http://127.0.0.1:9",
                                             "token_file": str(token)}}}).site("vu")
    ctl = rest_ctl(site)
    assert isinstance(ctl, RestCtl)
    ctl.client._version = version  # as if GET /openapi/v3 had said so
    return ctl


@pytest.mark.parametrize(("version", "absent"), [((0, 0, 42), {"MPI"}),
                                                 ((0, 0, 38), {"EXPAND", "MPI"})])
def test_a_rest_site_declares_mpi_absent(tmp_path: Path, version: tuple[int, int, int],
                                         absent: set[str]) -> None:
    ctl = _rest_ctl(tmp_path, version)
    cluster = SlurmCluster("vu", ctl, ScaledClock(0.0, 1.0), "r1", Payload(0.01))
    assert set(cluster.missing) == absent and cluster.missing["MPI"] == NO_MUNGE
    assert Capability.MPI not in cluster.capabilities
    assert (Capability.EXPAND in cluster.capabilities) == ("EXPAND" not in absent)
    ctl.runner.close()


def test_a_channel_credential_of_a_rest_site_is_refused_saying_why(tmp_path: Path) -> None:
    """The service's verifier (``unmunge`` through the site's runner) on a REST site: a
    refusal naming the reason, not a crash or a bare 'command not found'."""
    ctl = _rest_ctl(tmp_path, (0, 0, 42))
    decoded = unmunge(ctl.runner, "MUNGE:AAAA:")
    assert not decoded.ok and decoded.status == NO_MUNGE and decoded.user == ""
    ctl.runner.close()


def test_submit_mpi_to_a_rest_site_is_refused_before_any_request(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fake = FakeRest()  # never started: nothing may be sent
    config = _config(tmp_path, fake.url)
    program = tmp_path / "app.py"
    program.write_text("print('hi')\n")
    code = main(["submit", "--config", str(config), "--site", "vu", "--min", "1", "--max", "2",
                 "--mpi", "--service", "svc:7000", "--", str(program)])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1
    assert "--mpi jobs are not supported on a site reached over REST" in err
    fake.server.server_close()
