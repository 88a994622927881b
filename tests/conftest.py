"""Test options shared by the whole suite.

Tests marked ``integration`` need the dockerized testbed (a Docker engine and the
images that ``.ci/testbed-setup.sh`` builds). They run with ``--integration`` or
``MALLEABLE_INTEGRATION=1`` and are skipped otherwise, with that reason.

``.ci/run`` runs the suite in two parts (``--ci-part``; README, "What CI runs"): ``shared``,
every test but the :data:`ALONE` ones, on several pytest-xdist workers (``-n N --dist
loadgroup``), and then ``alone``, the :data:`ALONE` ones, in one process. Under
``--dist loadgroup`` each test gets the group :func:`ci_group` names: a group runs on one
worker, in collection order, so the modules that share a testbed fixture (or the host's
timing) still run one after another there, and groups start longest first
(:data:`EXPECTED_SECONDS`), so that no long module is queued last behind another.
Without these options nothing changes: the README's command runs every test in one process.
"""

from __future__ import annotations

import os

import pytest

#: Run on their own after the workers' part (``--ci-part alone``): the 272-node DAS-3
#: bring-up (tens of slurmd processes starting at once, a CPU burst the other worker's
#: timing-sensitive tests would see), and the MPI library tests, which time out a real
#: ``mpirun`` on this host and are the suite's most load-sensitive tests; and the site-outage
#: tests, which assert that the healthy site never missed a poll (availability 1.0): on 2
#: workers, vu's poll once went unanswered for 0.5 s (availability 0.9835) under the load.
ALONE = ("tests/integration/test_testbed_das3.py", "tests/integration/test_das3_mixed_serve.py",
         "tests/integration/test_site_outage.py", "tests/mpi/")

#: Groups whose modules must share a worker: the Slurm version matrix's testbeds
#: (``versioned_testbed``, session-scoped) are brought up once per worker that asks.
_SHARED_GROUPS = {
    "tests/integration/test_slurm_resize.py": "slurm-matrix",
    "tests/integration/test_slurm_versions.py": "slurm-matrix",
}

#: Estimated seconds per group (from the ci9-ci13 notes' one-module measurements; not yet
#: from a whole parallel run), used only to start the long groups first: a wrong figure
#: costs wall time, never a test. A group not listed counts as 60 s.
EXPECTED_SECONDS: dict[str, float] = {
    "test_manager_run": 380, "slurm-matrix": 350, "local": 330, "test_oar_serve_mpi": 320,
    "contract": 300, "test_app_testbed": 200, "test_site_service": 200,
    "test_site_outage": 170, "test_kill_points": 150, "test_site_faults": 150,
    "test_ansible": 150, "test_oar_dead_node": 120, "test_node_failure": 110,
    "test_oar_mixed": 110, "test_mixed_serve": 110, "test_oar_agent": 100,
    "test_slurm_clients": 100, "test_oar_run_restart": 90, "test_oar_mpi": 90,
}

CI_PARTS = ("all", "shared", "alone")


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--integration", action="store_true", default=False,
                     help="also run the tests that bring up the dockerized testbed")
    parser.addoption("--ci-part", choices=CI_PARTS, default="all",
                     help="CI's split (.ci/run): 'shared' runs every test but those that run "
                          "on their own, 'alone' only those; default 'all'")


def integration_enabled(config: pytest.Config) -> bool:
    return bool(config.getoption("--integration")) or os.environ.get(
        "MALLEABLE_INTEGRATION", "") not in ("", "0")


def _path(item: pytest.Item) -> str:
    return item.nodeid.split("::", 1)[0]


def runs_alone(path: str) -> bool:
    """Does the test file at ``path`` (relative to the repository) run in the alone part?"""
    return any(path == a or (a.endswith("/") and path.startswith(a)) for a in ALONE)


def ci_group(path: str) -> str:
    """The xdist group of the test file at ``path``: its module's (a module runs on one
    worker, with its module-scoped testbeds), a shared group's, or ``local`` for every test
    that needs no testbed (unit, simulator: one worker, in order, as in a plain run)."""
    if path in _SHARED_GROUPS:
        return _SHARED_GROUPS[path]
    if path.startswith("tests/integration/"):
        return path.removeprefix("tests/integration/").removesuffix(".py")
    if path.startswith("tests/contract/"):
        return "contract"
    return "local"


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook, which reads the group marks
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    part = config.getoption("--ci-part")
    if part != "all":
        keep = [i for i in items if runs_alone(_path(i)) == (part == "alone")]
        dropped = [i for i in items if runs_alone(_path(i)) != (part == "alone")]
        if dropped:
            config.hook.pytest_deselected(items=dropped)
        items[:] = keep
    # xdist's workers see --dist as "no", and its "loadgroup" option instead
    if getattr(config.option, "loadgroup", False) or config.getoption("dist", "no") == "loadgroup":
        groups = {id(i): ci_group(_path(i)) for i in items}
        for item in items:
            item.add_marker(pytest.mark.xdist_group(groups[id(item)]))
        # longest first (a stable sort: each group keeps its own order)
        items.sort(key=lambda i: -EXPECTED_SECONDS.get(groups[id(i)], 60.0))
    if integration_enabled(config):
        return
    skip = pytest.mark.skip(reason="needs the testbed: run with --integration")
    for item in items:
        if "integration" in item.keywords:
            item.add_marker(skip)
