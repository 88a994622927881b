"""The full DAS-3 topology: five controllers and 272 idle nodes, next to the small testbed."""

from __future__ import annotations

import time

import pytest

from malleable.testbed import DAS3, Testbed
from tests.fakes.waits import TestbedFactory

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(1200)]


def test_das3_has_five_controllers_and_272_idle_nodes(testbed_factory: TestbedFactory,
                                                      small_testbed: Testbed) -> None:
    started = time.monotonic()
    tb = testbed_factory(DAS3, timeout=900)
    took = time.monotonic() - started
    status = tb.status()
    print(f"das3 bring-up: {took:.1f} s")
    assert status.up
    assert status.controllers_up == 5
    assert status.idle == 272
    assert {n: s.idle for n, s in status.sites.items()} == {
        "vu": 85, "uva": 41, "delft": 68, "multimedian": 46, "leiden": 32}
    controllers = [c for c in status.containers if c.role == "controller"]
    computes = [c for c in status.containers if c.role == "compute"]
    assert len(controllers) == 5 and len(computes) == 10
    # the small testbed of the same session lives on, side by side
    assert small_testbed.status().up
    assert {c.id for c in status.containers}.isdisjoint(
        {c.id for c in small_testbed.containers()})
    tb.down()
    assert tb.containers() == []
