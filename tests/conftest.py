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

#: Seconds per group, measured: the per-module times (setup + call + teardown, summed) of
#: the last clean-clone ``.ci/run`` on 2 workers (2,341 s in all; issue 37's ci2 note), summed
#: per group; ``local`` counts only the unit and simulator modules of 1 s or more. Used only
#: to start the long groups first: a wrong figure costs wall time, never a test. A group not
#: listed counts as 60 s. Refresh them from the "time per module" table ``.ci/run`` prints.
EXPECTED_SECONDS: dict[str, float] = {
    "contract": 556, "test_ansible": 364, "test_manager_run": 337, "test_kill_points": 285,
    "test_app_testbed": 250, "local": 199, "test_oar_serve_mpi": 182,
    "test_site_service": 165, "test_oar_mixed": 111, "test_site_faults": 109,
    "test_mixed_serve": 109, "test_oar_agent": 107, "test_oar_dead_node": 85,
    "slurm-matrix": 84, "test_oar_mpi": 81, "test_release": 77, "test_oar_run_restart": 72,
    "test_slurm_clients": 71, "test_site_rest": 71, "test_bench_serve_testbed": 54,
    "test_abuse": 52, "test_node_failure": 51, "test_oar_serve": 40, "test_coorm_oar": 37,
    "test_oar_submit": 37, "test_experiment_slurm": 22, "test_oar_restart": 22,
    "test_testbed_lifecycle": 17, "test_testbed_users": 13, "test_testbed_small": 12,
    "test_coorm_real": 9, "test_stray_helpers": 3,
}

#: Groups that need no testbed image (the unit and simulator tests; Ansible and the release
#: build on the Debian base only, built first, with the bookworm testbed image's build, in
#: seconds). While ``.ci/run`` builds the images beside the tests
#: (``MALLEABLE_CI_IMAGES_BUILDING=1``: the build was not done when the tests started), these
#: start first, so that the workers do not begin by waiting for an image.
NO_IMAGE_GROUPS = ("test_ansible", "local", "test_release")
#: Groups that need the images of the other Slurm versions (24.11, 26.05), built last: while
#: the images build, these start last, so that they do not hold a worker waiting for them
#: (the contract suite asks for 24.11 and 26.05 in its first minute).
OTHER_VERSION_GROUPS = ("contract", "slurm-matrix", "test_site_rest")

CI_PARTS = ("all", "shared", "alone")


def group_order(group: str, images_building: bool) -> tuple[int, float]:
    """Sort key of a group under ``--dist loadgroup``: longest first; while the images are
    still being built, the groups that need none come first and those that need the last
    ones built come last (longest first within each)."""
    rank = 1
    if images_building and group in NO_IMAGE_GROUPS:
        rank = 0
    elif images_building and group in OTHER_VERSION_GROUPS:
        rank = 2
    return (rank, -EXPECTED_SECONDS.get(group, 60.0))


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
        # (decided once by .ci/run, so that every xdist worker collects the same order)
        building = os.environ.get("MALLEABLE_CI_IMAGES_BUILDING", "") == "1"
        items.sort(key=lambda i: group_order(groups[id(i)], building))
    if integration_enabled(config):
        return
    skip = pytest.mark.skip(reason="needs the testbed: run with --integration")
    for item in items:
        if "integration" in item.keywords:
            item.add_marker(skip)
