"""Fixtures for the integration tests against the real dockerized testbed.

The ``--integration`` option (or ``MALLEABLE_INTEGRATION=1``) lives in tests/conftest.py;
without it every test marked ``integration`` is skipped. With it, a missing Docker
engine is an error, not a skip.

``testbed_factory(topology, slurm=V)`` brings up a uniquely named testbed (so several test
runs can share a machine) and takes every testbed it made down at the end of the *module*
that asked for it, even when a test or the bring-up itself failed: a module's testbeds
(the 272-node DAS-3 one among them) do not idle on through the rest of the session, taking
CPU from the timing-sensitive MPI tests that follow. ``small_testbed`` is the one testbed
shared by the modules of a session, with the ``small`` topology (2 sites x 4 nodes);
``MALLEABLE_TESTBED=NAME`` makes it the already running testbed NAME instead (brought up
with ``--topology small``; left up at the end).
``versioned_testbed`` is the small testbed once per Slurm version of the matrix
(``slurm_matrix``: 22.05, 24.11, 26.05, or ``MALLEABLE_SLURM_VERSIONS``): the default
version's is ``small_testbed``; another version's is brought up when its tests start and
taken down when they are done, so at most one extra version is up at a time.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from malleable.testbed import SMALL, Docker, Testbed, Topology
from malleable.testbed.versions import DEFAULT
from tests.fakes.waits import TestbedFactory, slurm_matrix, unique_name

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


@contextlib.contextmanager
def _testbeds(docker: Docker, root: Path) -> Iterator[TestbedFactory]:
    """A maker of testbeds that takes every one it made down when the block ends."""
    made: list[Testbed] = []

    def make(topology: Topology, *, name: str | None = None, timeout: float = 600.0,
             slurm: str = DEFAULT) -> Testbed:
        tb = Testbed(name or unique_name(), root=root, docker=docker)
        made.append(tb)  # registered before bring-up: a failed bring-up is torn down too
        tb.up(topology, timeout=timeout, slurm=slurm)
        return tb

    try:
        yield make
    finally:
        for tb in reversed(made):
            try:
                tb.down()
            except Exception:  # one failed teardown must not leave the others up
                logger.exception("could not take testbed %s down", tb.name)


@pytest.fixture(scope="module")
def testbed_factory(docker_engine: Docker, testbed_root: Path) -> Iterator[TestbedFactory]:
    with _testbeds(docker_engine, testbed_root) as make:
        yield make


@pytest.fixture(scope="session")
def _session_testbeds(docker_engine: Docker, testbed_root: Path) -> Iterator[TestbedFactory]:
    with _testbeds(docker_engine, testbed_root) as make:
        yield make


@pytest.fixture(scope="session")
def small_testbed(_session_testbeds: TestbedFactory, docker_engine: Docker) -> Testbed:
    name = os.environ.get("MALLEABLE_TESTBED", "")
    if name:
        tb = Testbed(name, docker=docker_engine)
        if tb.record().topology.name != SMALL.name:
            pytest.fail(f"MALLEABLE_TESTBED={name} is not a 'small' testbed")
        return tb
    return _session_testbeds(SMALL)


@pytest.fixture(scope="session", params=slurm_matrix())
def versioned_testbed(request: pytest.FixtureRequest, docker_engine: Docker,
                      testbed_root: Path) -> Iterator[Testbed]:
    version: str = request.param
    if version == DEFAULT:
        yield request.getfixturevalue("small_testbed")
        return
    tb = Testbed(unique_name(f"v{version.replace('.', '')}"), root=testbed_root,
                 docker=docker_engine)
    try:
        tb.up(SMALL, timeout=900.0, slurm=version)
        yield tb
    finally:
        try:
            tb.down()
        except Exception:
            logger.exception("could not take testbed %s down", tb.name)
