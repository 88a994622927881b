"""Fixtures for the integration tests against the real dockerized testbed.

The ``--integration`` option (or ``MALLEABLE_INTEGRATION=1``) lives in tests/conftest.py;
without it every test marked ``integration`` is skipped. With it, a missing Docker
engine is an error, not a skip.

``testbed_factory(topology)`` brings up a uniquely named testbed (so several test runs
can share a machine) and takes every testbed it made down at the end of the session,
even when a test or the bring-up itself failed. ``small_testbed`` is one such testbed
with the ``small`` topology (2 sites x 4 nodes), shared by the tests of a session;
``MALLEABLE_TESTBED=NAME`` makes it the already running testbed NAME instead (brought up
with ``--topology small``; left up at the end).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from malleable.testbed import SMALL, Docker, Testbed, Topology
from tests.fakes.waits import TestbedFactory, unique_name

logger = logging.getLogger(__name__)


@pytest.fixture(scope="session")
def docker_engine() -> Docker:
    docker = Docker()
    if not docker.available():
        pytest.fail("no Docker engine answers: run `bash .ci/testbed-setup.sh` first")
    return docker


@pytest.fixture(scope="session")
def testbed_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("testbeds")


@pytest.fixture(scope="session")
def testbed_factory(docker_engine: Docker, testbed_root: Path) -> Iterator[TestbedFactory]:
    made: list[Testbed] = []

    def make(topology: Topology, *, name: str | None = None, timeout: float = 600.0) -> Testbed:
        tb = Testbed(name or unique_name(), root=testbed_root, docker=docker_engine)
        made.append(tb)  # registered before bring-up: a failed bring-up is torn down too
        tb.up(topology, timeout=timeout)
        return tb

    yield make
    for tb in reversed(made):
        try:
            tb.down()
        except Exception:  # one failed teardown must not leave the others up
            logger.exception("could not take testbed %s down", tb.name)


@pytest.fixture(scope="session")
def small_testbed(testbed_factory: TestbedFactory, docker_engine: Docker) -> Testbed:
    name = os.environ.get("MALLEABLE_TESTBED", "")
    if name:
        tb = Testbed(name, docker=docker_engine)
        if tb.record().topology.name != SMALL.name:
            pytest.fail(f"MALLEABLE_TESTBED={name} is not a 'small' testbed")
        return tb
    return testbed_factory(SMALL)
