"""The controllers' published sshd ports: chosen outside Docker's range, chosen again when
taken before ``compose up`` binds them (CI once failed: "port is already allocated")."""

from __future__ import annotations

import json
import socket
from dataclasses import dataclass, field
from pathlib import Path

import pytest

import malleable.testbed.bringup as bringup
from malleable.errors import ExternalError
from malleable.testbed.docker import Result
from malleable.testbed.topology import SMALL


def test_ports_are_drawn_below_the_kernels_ephemeral_range() -> None:
    start = bringup._ephemeral_start()
    ports = bringup.free_ports(20)
    assert len(set(ports)) == 20
    assert all(bringup.PORT_FLOOR <= p < start for p in ports), (ports, start)


def test_the_ephemeral_range_is_read_from_the_kernel(tmp_path: Path) -> None:
    conf = tmp_path / "range"
    conf.write_text("40000\t60999\n", encoding="ascii")
    assert bringup._ephemeral_start(conf) == 40000
    conf.write_text("garbage", encoding="ascii")
    assert bringup._ephemeral_start(conf) == 32768
    assert bringup._ephemeral_start(tmp_path / "missing") == 32768


def test_a_taken_port_is_never_chosen() -> None:
    taken = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        taken.bind(("127.0.0.1", 0))
        port = taken.getsockname()[1]
        with pytest.raises(ExternalError, match=r"found only 0 of 1 free TCP ports"):
            bringup.free_ports(1, span=(port, port + 1))
    finally:
        taken.close()
    assert bringup.free_ports(1, span=(port, port + 1)) == [port]  # free again


@dataclass
class FakeDocker:
    """compose answers "port is already allocated" to the first ``taken`` ups."""

    taken: int
    calls: list[tuple[str, ...]] = field(default_factory=list)
    files: list[dict[str, object]] = field(default_factory=list)

    def compose(self, project: str, file: str, *args: str, timeout: float = 300,
                check: bool = True) -> Result:
        self.calls.append(args)
        if args[0] == "up":
            self.files.append(json.loads(Path(file).read_text(encoding="utf-8")))
            if self.taken:
                self.taken -= 1
                raise ExternalError("docker-compose --project-name p ... failed with exit "
                                    "code 1: Bind for 127.0.0.1:32785 failed: port is "
                                    "already allocated")
        return Result(("docker-compose", *args), 0, "", "")


@dataclass
class FakeState:
    path: Path

    @property
    def compose_file(self) -> Path:
        return self.path / "compose.yml"


@dataclass
class FakeTestbed:
    docker: FakeDocker
    state: FakeState
    name: str = "t1"
    project: str = "malleable-t1"


def _testbed(tmp_path: Path, taken: int) -> FakeTestbed:
    tb = FakeTestbed(FakeDocker(taken), FakeState(tmp_path))
    bringup.write_compose(tb, SMALL, "img")  # type: ignore[arg-type]
    return tb


def _ssh_ports(doc: dict[str, object]) -> list[str]:
    services = doc["services"]
    assert isinstance(services, dict)
    return sorted(s["ports"][0] for s in services.values() if "ports" in s)


def test_compose_up_chooses_the_ports_again_when_one_was_taken(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch
                                                               ) -> None:
    draws = iter([[21001, 21002], [22001, 22002]])
    monkeypatch.setattr(bringup, "free_ports", lambda count: next(draws))
    tb = _testbed(tmp_path, taken=1)
    bringup.compose_up(tb, SMALL, "img")  # type: ignore[arg-type]
    assert [c[0] for c in tb.docker.calls] == ["up", "down", "up"]
    first, second = (_ssh_ports(f) for f in tb.docker.files)
    assert first == ["127.0.0.1:21001:22", "127.0.0.1:21002:22"]
    assert second == ["127.0.0.1:22001:22", "127.0.0.1:22002:22"]


def test_compose_up_gives_up_after_its_retries(tmp_path: Path) -> None:
    tb = _testbed(tmp_path, taken=bringup.PORT_RETRIES + 1)
    with pytest.raises(ExternalError, match="port is already allocated"):
        bringup.compose_up(tb, SMALL, "img")  # type: ignore[arg-type]
    assert [c[0] for c in tb.docker.calls].count("up") == bringup.PORT_RETRIES + 1


def test_other_compose_failures_are_not_retried(tmp_path: Path) -> None:
    tb = _testbed(tmp_path, taken=0)

    def broken(project: str, file: str, *args: str, timeout: float = 300,
               check: bool = True) -> Result:
        tb.docker.calls.append(args)
        raise ExternalError("docker-compose ... failed with exit code 1: no such image")

    tb.docker.compose = broken  # type: ignore[method-assign]
    with pytest.raises(ExternalError, match="no such image"):
        bringup.compose_up(tb, SMALL, "img")  # type: ignore[arg-type]
    assert [c[0] for c in tb.docker.calls] == ["up"]
