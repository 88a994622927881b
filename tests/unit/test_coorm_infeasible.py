"""Issue 19: a launch that no cluster of the service can ever run exits 4 at once."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator

import pytest

from malleable.cli import main
from malleable.coorm.core import CooRMCore, CoreConfig
from malleable.coorm.launchers import Launcher
from malleable.coorm.protocol import Filter
from malleable.coorm.resources import paper_platform
from malleable.coorm.service import CooRMService
from malleable.workloads.coorm_apps import Amdahl, Cem, Rigid


def _launcher(app: Rigid | Amdahl | Cem, flt: Filter | None = None) -> Launcher:
    launcher = Launcher("x", app, flt)
    launcher.set_clusters(paper_platform(2, 128).clusters)
    return launcher


@pytest.mark.parametrize(("app", "flt", "message"), [
    (Rigid(999, 1.0, 1.0), None, "x: a rigid application of 999 hosts fits no cluster of the "
                                 "service (largest: 128 hosts)"),
    (Rigid(129, 1.0, 1.0), None, "129 hosts fits no cluster"),
    (Rigid(4, 1.0, 1.0), Filter(min_hosts=999), "no cluster of the service passes the "
                                                "launcher's filter (2 clusters sent)"),
    (Rigid(4, 1.0, 1.0), Filter(clusters=("nosuch",)), "passes the launcher's filter"),
    (Amdahl(4, 1.0, 1.0, 0.1), Filter(clusters=("nosuch",)), "passes the launcher's filter"),
])
def test_an_infeasible_launcher_says_why(app: Rigid | Amdahl, flt: Filter | None,
                                         message: str) -> None:
    assert message in _launcher(app, flt).infeasible()


@pytest.mark.parametrize("app", [Rigid(128, 1.0, 1.0), Rigid(1, 1.0, 1.0),
                                 Amdahl(999, 1.0, 1.0, 0.1), Cem.like(999, 10.0, 0.1)])
def test_a_feasible_launcher_has_no_problem(app: Rigid | Amdahl | Cem) -> None:
    assert _launcher(app).infeasible() == ""
    assert Launcher("y", app).infeasible() == ""  # clusters not known yet


@pytest.fixture
def service() -> Iterator[str]:
    """A CooRM service of 2 clusters of 128 hosts on a free port, in a thread."""
    loop = asyncio.new_event_loop()
    svc = CooRMService(CooRMCore(paper_platform(2, 128), CoreConfig(0.1, 0.1, 0.1)),
                       "127.0.0.1", 0)
    host, port = loop.run_until_complete(svc.start())
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    yield f"{host}:{port}"
    asyncio.run_coroutine_threadsafe(svc.close(), loop).result(10)
    loop.call_soon_threadsafe(loop.stop)
    thread.join(10)
    loop.close()


@pytest.mark.parametrize("extra", [["--hosts", "999"], ["--hosts", "129"],
                                   ["--min-hosts", "999"], ["--clusters", "nosuch"]])
def test_launch_against_a_smaller_service_exits_4_at_once(
        service: str, extra: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    started = time.monotonic()
    assert main(["coorm", "launch", "--connect", service, *extra]) == 4
    assert time.monotonic() - started < 5
    err = capsys.readouterr().err
    assert err.startswith("malleable: error: app: ") and err.count("\n") == 1
