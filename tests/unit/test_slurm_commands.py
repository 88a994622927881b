"""Input errors of `malleable resize` and `malleable manager run` (exit 2, nothing created)."""

from __future__ import annotations

from pathlib import Path

import pytest

from malleable.cli import main
from malleable.store import RunInfo, Store

CONFIG = """
[clusters.vu]
host = "127.0.0.1"
port = 1
user = "u"
key = "k"
known_hosts = "kh"
"""


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "clusters.toml"
    path.write_text(CONFIG)
    (tmp_path / "k").write_text("")  # load_config checks that the key files exist
    (tmp_path / "kh").write_text("")
    return path


def _run(config: Path, out: Path, *extra: str) -> list[str]:
    return ["manager", "run", "--config", str(config), "--out", str(out), *extra]


@pytest.mark.parametrize(("extra", "message"), [
    (["--time-scale", "0"], "--time-scale must be a positive number"),
    (["--poll", "-1"], "--poll must be a positive"),
    (["--jobs", "0"], "--jobs must be at least 1"),
    (["--deadline", "0"], "--deadline must be a positive"),
    (["--site-timeout", "0"], "--site-timeout must be a positive"),
    (["--site-timeout", "inf"], "--site-timeout must be a positive"),
    (["--sites", "vu,delft"], "no site 'delft'"),
    (["--workload", "nope"], "neither a file nor one of"),
])
def test_manager_run_bad_input(config: Path, tmp_path: Path, extra: list[str], message: str,
                               capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    assert main(_run(config, out, *extra)) == 2
    assert message in capsys.readouterr().err
    if "--sites" not in extra and "--workload" not in extra:
        assert not out.exists()


def test_manager_run_refuses_another_runs_state(config: Path, tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    out.mkdir()
    store = Store.open(out / "state.sqlite")
    store.begin_run(RunInfo("abcd", 1.0, 0.1, "pwa", "egs", "wm"), [])
    store.close()
    assert main(_run(config, out, "--approach", "pra", "--policy", "egs",
                     "--time-scale", "0.1")) == 2
    err = capsys.readouterr().err
    assert "holds another run: --approach pra (the run has pwa)" in err


def test_resize_bad_input(config: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["resize", "--config", str(config), "--site", "vu", "5", "0"]) == 2
    assert "NODES must be at least 1" in capsys.readouterr().err
    assert main(["resize", "--config", str(config), "--site", "x", "5", "2"]) == 2
    assert "no site 'x'" in capsys.readouterr().err
    assert main(["resize", "--config", str(config), "--site", "vu", "--expand-wait", "0",
                 "5", "2"]) == 2


def test_resize_unreachable_site_is_an_external_error(
        config: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["resize", "--config", str(config), "--site", "vu", "5", "2"]) == 3
    assert "cannot connect" in capsys.readouterr().err


def test_a_missing_known_hosts_file_is_bad_input_at_load(
        config: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (config.parent / "kh").unlink()
    assert main(["resize", "--config", str(config), "--site", "vu", "5", "2"]) == 2
    err = capsys.readouterr().err
    assert f"clusters.vu.known_hosts: {config.parent / 'kh'}: no such file" in err
    assert err.count("\n") == 1


def test_resize_beyond_the_site_is_infeasible_at_once(config: Path, monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    from malleable.adapters.slurm import sites
    from malleable.adapters.slurm.ctl import SlurmCtl
    from tests.fakes.slurm import FakeSlurm, node_names

    fake = FakeSlurm(node_names(4))
    job = fake.add_job(2)
    monkeypatch.setattr(sites, "ctl_for", lambda site: SlurmCtl(fake, user="malleable"))
    assert main(["resize", "--config", str(config), "--site", "vu", str(job.job_id), "9"]) == 4
    assert "9 nodes asked; the site has 4" in capsys.readouterr().err
    assert not any(c[0] in ("salloc", "scontrol") for c in fake.calls)
