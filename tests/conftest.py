"""Test options shared by the whole suite.

Tests marked ``integration`` need the dockerized testbed (a Docker engine and the
images that ``.ci/testbed-setup.sh`` builds). They run with ``--integration`` or
``MALLEABLE_INTEGRATION=1`` and are skipped otherwise, with that reason.
"""

from __future__ import annotations

import os

import pytest


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--integration", action="store_true", default=False,
                     help="also run the tests that bring up the dockerized testbed")


def integration_enabled(config: pytest.Config) -> bool:
    return bool(config.getoption("--integration")) or os.environ.get(
        "MALLEABLE_INTEGRATION", "") not in ("", "0")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if integration_enabled(config):
        return
    skip = pytest.mark.skip(reason="needs the testbed: run with --integration")
    for item in items:
        if "integration" in item.keywords:
            item.add_marker(skip)
