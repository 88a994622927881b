"""The CooRM protocol over TCP: a service in this process, launchers as separate processes."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

from malleable.coorm.core import CooRMCore, CoreConfig
from malleable.coorm.protocol import Error, Subscribed, decode
from malleable.coorm.resources import paper_platform
from malleable.coorm.service import CooRMService

SRC = str(Path(__file__).resolve().parents[2] / "src")
FAIR_START = 0.3


async def _launcher(port: int, *args: str) -> asyncio.subprocess.Process:
    env = dict(os.environ, PYTHONPATH=SRC)
    return await asyncio.create_subprocess_exec(
        sys.executable, "-m", "malleable.coorm.launch", "--connect", f"127.0.0.1:{port}", *args,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=env)


async def _until(predicate: Any, timeout: float) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        if loop.time() > deadline:
            raise TimeoutError("condition not met in time")
        await asyncio.sleep(0.02)


async def _result(proc: asyncio.subprocess.Process, timeout: float) -> tuple[int, dict[str, Any]]:
    out, err = await asyncio.wait_for(proc.communicate(), timeout)
    assert proc.returncode is not None
    lines = out.decode().strip().splitlines()
    assert lines, f"launcher printed nothing; stderr: {err.decode()}"
    return proc.returncode, json.loads(lines[-1])


async def _two_launchers() -> tuple[list[tuple[int, dict[str, Any]]], CooRMService]:
    core = CooRMCore(paper_platform(1, 4), CoreConfig(0.05, FAIR_START, 0.5))
    service = CooRMService(core)
    _, port = await service.start()
    try:
        # the first runs long enough for the second process to start up and subscribe
        first = await _launcher(port, "--name", "first", "--hosts", "4", "--runtime", "3.0",
                                "--walltime", "6.0")
        await _until(lambda: core.apps.get("a1") is not None
                     and core.apps["a1"].state == "running", 20.0)
        second = await _launcher(port, "--name", "second", "--kind", "amdahl", "--hosts", "2",
                                 "--runtime", "0.4", "--walltime", "0.5", "--serial", "0.0")
        results = [await _result(first, 30.0), await _result(second, 30.0)]
    finally:
        await service.close()
    return results, service


def test_two_launcher_processes_share_a_cluster_in_order() -> None:
    results, service = asyncio.run(_two_launchers())
    (rc1, first), (rc2, second) = results
    assert (rc1, rc2) == (0, 0)
    assert (first["app"], second["app"]) == ("a1", "a2")
    assert first["rids"] == {"c1": ["c1-h0000", "c1-h0001", "c1-h0002", "c1-h0003"]}
    # the second could only start once the first was done and fair-start had passed;
    # its Amdahl model then takes all 4 hosts (it ends first that way)
    assert len(second["rids"]["c1"]) == 4
    assert second["started"] >= first["ended"] + FAIR_START - 0.05
    assert second["subscribed"] < first["ended"]
    # views: before the first ended (free at its deadline), then after its done
    assert second["views"] >= 2 and second["requests"] >= 1
    assert first["killed"] is False and second["killed"] is False
    assert service.core.stats.starts == 2 and service.core.stats.kills == 0
    sent = first["bytes_sent"] + second["bytes_sent"]
    assert service.traffic.bytes_in == sent
    assert service.traffic.bytes_out == first["bytes_received"] + second["bytes_received"]


async def _overrun() -> tuple[int, dict[str, Any]]:
    core = CooRMCore(paper_platform(1, 2), CoreConfig(0.05, 0.0, 0.2))
    service = CooRMService(core)
    _, port = await service.start()
    try:
        proc = await _launcher(port, "--hosts", "1", "--runtime", "0.3", "--",
                               sys.executable, "-c", "import time; time.sleep(20)")
        return await _result(proc, 30.0)
    finally:
        await service.close()


def test_an_overrunning_application_is_killed() -> None:
    rc, result = asyncio.run(_overrun())
    assert rc == 3 and result["killed"] is True
    assert result["ended"] - result["started"] < 10.0


async def _raw_session() -> list[Any]:
    core = CooRMCore(paper_platform(1, 2), CoreConfig(0.0, 0.0))
    service = CooRMService(core)
    _, port = await service.start()
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        replies = []
        for line in (b"garbage\n", b'{"v":1,"type":"done"}\n',
                     b'{"v":1,"type":"subscribe","filter":{},"name":"raw"}\n'):
            writer.write(line)
            await writer.drain()
            replies.append(decode(await asyncio.wait_for(reader.readline(), 10.0)))
        return replies
    finally:
        writer.close()
        await service.close()


def test_protocol_errors_are_answered_not_fatal() -> None:
    replies = asyncio.run(_raw_session())
    assert isinstance(replies[0], Error) and "not JSON" in replies[0].message
    assert isinstance(replies[1], Error) and "subscribe" in replies[1].message
    assert replies[2] == Subscribed(app="a1")


def test_launcher_reports_an_unreachable_service() -> None:
    async def run() -> tuple[int, bytes]:
        proc = await _launcher(1, "--hosts", "1")
        _, err = await asyncio.wait_for(proc.communicate(), 30.0)
        assert proc.returncode is not None
        return proc.returncode, err

    rc, err = asyncio.run(run())
    assert rc == 3 and b"cannot reach the CooRM service" in err


@pytest.mark.parametrize("endpoint", ["nonsense", "host:port"])
def test_bad_endpoint_is_an_input_error(endpoint: str) -> None:
    from malleable.coorm.launch import parse_endpoint
    from malleable.errors import InputError

    with pytest.raises(InputError, match="HOST:PORT"):
        parse_endpoint(endpoint)


async def _cli_service() -> tuple[int, dict[str, Any], str]:
    env = dict(os.environ, PYTHONPATH=SRC)
    server = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "malleable", "coorm", "serve", "--clusters", "2", "--hosts", "3",
        "--repolicy-interval", "0.05", "--fair-start", "0.1",
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, env=env)
    try:
        assert server.stdout is not None
        ready = json.loads(await asyncio.wait_for(server.stdout.readline(), 30.0))
        port = int(ready["listening"].rsplit(":", 1)[1])
        proc = await _launcher(port, "--kind", "amdahl", "--hosts", "2", "--runtime", "0.2",
                               "--walltime", "5", "--", sys.executable, "-c",
                               "import os; print('hosts:', os.environ['COORM_HOSTS'])")
        out, _err = await asyncio.wait_for(proc.communicate(), 30.0)
        assert proc.returncode is not None
        lines = out.decode().strip().splitlines()
        return proc.returncode, json.loads(lines[-1]), lines[0]
    finally:
        server.terminate()
        await asyncio.wait_for(server.wait(), 30.0)


def test_cli_service_and_a_command_payload() -> None:
    rc, result, printed = asyncio.run(_cli_service())
    assert rc == 0 and result["exit_code"] == 0
    # an Amdahl job takes all 3 hosts of the faster cluster c2
    assert result["rids"] == {"c2": ["c2-h0000", "c2-h0001", "c2-h0002"]}
    assert printed == "hosts: c2-h0000 c2-h0001 c2-h0002"


def test_launch_options_are_validated() -> None:
    import argparse

    from malleable.coorm.launch import add_launch_arguments, build_launcher
    from malleable.errors import InputError

    parser = argparse.ArgumentParser()
    add_launch_arguments(parser)
    ok = build_launcher(parser.parse_args(["--connect", "h:1", "--kind", "cem", "--hosts", "4",
                                           "--clusters", "c1,c2", "--runtime", "50"]))
    assert ok.app.kind == "cem" and ok.filter.clusters == ("c1", "c2")
    with pytest.raises(InputError, match="bad launcher option"):
        build_launcher(parser.parse_args(["--connect", "h:1", "--hosts", "0"]))
    with pytest.raises(InputError, match="bad launcher option"):
        build_launcher(parser.parse_args(["--connect", "h:1", "--runtime", "5",
                                          "--walltime", "1"]))


@pytest.mark.parametrize("argv", [["--clusters", "0"], ["--fair-start", "-1"]])
def test_bad_serve_options_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    from malleable.cli import main

    try:
        code = main(["coorm", "serve", *argv])
    except SystemExit as exc:  # refused by the parser (--clusters 0), one usage line
        code = int(exc.code or 0)
    assert code == 2
    assert "error" in capsys.readouterr().err
