"""``malleable manager serve`` as a process: status file, /metrics, SIGHUP reload, SIGTERM
exit 0 with the state kept. Its one site cannot be reached (no Slurm on this machine):
the service stays up and shows the site down."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import urllib.request
from pathlib import Path

from malleable.cli import main
from tests.fakes.waits import wait_for

SRC = Path(__file__).resolve().parents[2] / "src"

CONFIG = """
[service]
state = "state.sqlite"
poll = {poll}
metrics = "127.0.0.1:0"

[policy]
name = "{policy}"

[clusters.nowhere]
command_timeout = 5
"""


def _start(tmp_path: Path, log: Path) -> subprocess.Popen[bytes]:
    # the caller's PYTHONPATH after src (e.g. an older prometheus_client to check the pin)
    path = os.pathsep.join(p for p in (str(SRC), os.environ.get("PYTHONPATH", "")) if p)
    env = {**os.environ, "PYTHONPATH": path, "PATH": "/usr/bin:/bin"}
    return subprocess.Popen(
        [sys.executable, "-m", "malleable", "manager", "serve", "--config",
         str(tmp_path / "manager.toml"), "--allow-root"],
        stdout=subprocess.DEVNULL, stderr=log.open("wb"), env=env, cwd=tmp_path)


def test_serve_runs_reloads_on_sighup_and_stops_on_sigterm(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    config = tmp_path / "manager.toml"
    config.write_text(CONFIG.format(poll=0.2, policy="fpsma"))
    log = tmp_path / "serve.log"
    proc = _start(tmp_path, log)
    try:
        status = tmp_path / "state.sqlite.status.json"
        wait_for(lambda: status.exists() and json.loads(status.read_text())["cycles"] >= 2, 30,
                 "two cycles")
        port = int(re.search(r"event=metrics address=127.0.0.1:(\d+)", log.read_text())[1])  # type: ignore[index]
        text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read()
        assert b'malleable_site_up{site="nowhere"} 0.0' in text
        assert b"malleable_cycles_total" in text

        assert main(["manager", "status", "--config", str(config), "--json"]) == 0
        shown = json.loads(capsys.readouterr().out)
        assert shown["running"] is True and shown["policy"]["name"] == "fpsma"
        assert shown["sites"][0]["name"] == "nowhere" and shown["sites"][0]["online"] is False
        assert main(["manager", "status", "--config", str(config)]) == 0
        assert "site nowhere: DOWN" in capsys.readouterr().out

        config.write_text(CONFIG.format(poll=0.3, policy="egs"))
        proc.send_signal(signal.SIGHUP)
        wait_for(lambda: "event=reloaded policy=egs poll=0.3" in log.read_text(), 30, "reload")
        config.write_text("[service]\nnope = 1\n")
        proc.send_signal(signal.SIGHUP)
        wait_for(lambda: "event=reload_failed" in log.read_text(), 30, "a refused reload")
        assert proc.poll() is None  # a bad config does not stop the service

        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    lines = log.read_text().splitlines()
    assert any("event=stopped reason=signal" in line for line in lines)
    assert all(line.split(" ", 1)[0] in ("INFO", "WARNING", "ERROR", "DEBUG") for line in lines)
    assert (tmp_path / "state.sqlite").exists()


def test_status_before_the_first_run_is_a_one_line_error(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    config = tmp_path / "manager.toml"
    config.write_text(CONFIG.format(poll=1, policy="fpsma"))
    assert main(["manager", "status", "--config", str(config)]) == 2
    err = capsys.readouterr().err.strip()
    assert "the service has not run with this config yet" in err and "\n" not in err


def test_serve_refuses_root_and_bad_configs(tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    config = tmp_path / "manager.toml"
    config.write_text("[service]\nstate = 's'\npoll = -1\n[clusters.a]\n")
    assert main(["manager", "serve", "--config", str(config)]) == 2
    assert "service.poll" in capsys.readouterr().err
    config.write_text(CONFIG.format(poll=1, policy="fpsma"))
    if os.geteuid() == 0:
        assert main(["manager", "serve", "--config", str(config)]) == 2
        assert "must not run as root" in capsys.readouterr().err


def test_unit_file_ships_with_the_package() -> None:
    import malleable.site

    unit = Path(malleable.site.__file__).parent / "malleable-manager.service"
    text = unit.read_text()
    assert "User=malleable" in text
    assert "ExecStart=/usr/bin/env malleable manager serve --config " \
           "/etc/malleable/manager.toml" in text
    assert "ExecReload=/bin/kill -HUP $MAINPID" in text


def test_the_unit_and_the_ansible_role_set_the_allocator_alike() -> None:
    import malleable.site

    unit = (Path(malleable.site.__file__).parent / "malleable-manager.service").read_text()
    assert "Environment=MALLOC_ARENA_MAX=2" in unit.splitlines()
    for name in ("MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_THRESHOLD_"):
        assert f"Environment={name}=131072" in unit.splitlines()
    role = Path(__file__).resolve().parents[2] / "ansible" / "roles" / "malleable_manager"
    defaults = (role / "defaults" / "main.yml").read_text()
    assert "malleable_manager_malloc_arena_max: 2" in defaults.splitlines()
    assert "malleable_manager_malloc_threshold: 131072" in defaults.splitlines()
    for template in ("malleable-manager.init.j2", "venv-path.conf.j2"):
        text = (role / "templates" / template).read_text()
        assert "MALLOC_ARENA_MAX={{ malleable_manager_malloc_arena_max }}" in text, template
        for name in ("MALLOC_TRIM_THRESHOLD_", "MALLOC_MMAP_THRESHOLD_"):
            assert f"{name}={{{{ malleable_manager_malloc_threshold }}}}" in text, template


