"""The contract's testbed drivers (tests/fakes/drivers.py): a wait that times out says what
the site showed then (the adapter's view and the site's own queue), and the waits that ended
are kept, so that a run can print its longest against the timeout (issue 37: the OAR
contract's 60-s wait once failed at load 80-118 with nothing to go on)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pytest

from malleable.model import ClusterView
from tests.fakes.drivers import OarTestbedDriver, TestbedDriver


@dataclass
class _Done:
    stdout: str


@dataclass
class _Testbed:
    said: str
    calls: list[tuple[str, list[str]]] = field(default_factory=list)

    def exec(self, site: str, argv: list[str], **_: Any) -> _Done:
        self.calls.append((site, argv))
        return _Done(self.said)


class _Rm:
    def drain_events(self) -> list[object]:
        return []

    def observe(self) -> ClusterView:
        return ClusterView("vu", 4, 2)


def test_a_wait_that_times_out_says_what_the_slurm_site_showed() -> None:
    tb = _Testbed("41 ct1.a PENDING 2 Resources")
    driver = TestbedDriver("slurm-testbed", _Rm(), testbed=tb, interval=0.01, timeout=0.05)  # type: ignore[arg-type]
    with pytest.raises(pytest.fail.Exception) as failed:
        driver.wait(lambda: False, "a to run")
    said = str(failed.value)
    assert "timed out after 0.05 s waiting for a to run" in said
    assert "idle 2 of 4" in said and "41 ct1.a PENDING 2 Resources" in said
    assert tb.calls[-1][0] == "vu" and tb.calls[-1][1][0] == "squeue"
    assert driver.waited == []


def test_an_oar_wait_shows_oarstat_and_a_broken_view_does_not_hide_it() -> None:
    class _Broken(_Rm):
        def observe(self) -> ClusterView:
            raise RuntimeError("ssh: timed out")

    tb = _Testbed('{"7": {"state": "Waiting"}}')
    driver = OarTestbedDriver("oar-testbed", _Broken(), testbed=tb, interval=0.01,  # type: ignore[arg-type]
                              timeout=0.05)
    with pytest.raises(pytest.fail.Exception) as failed:
        driver.wait(lambda: False, "a to run")
    said = str(failed.value)
    assert "observe failed: RuntimeError('ssh: timed out')" in said
    assert '"state": "Waiting"' in said and tb.calls[-1] == ("grid", ["oarstat", "-f", "-J"])


def test_the_waits_that_ended_are_kept_and_reported(capsys: pytest.CaptureFixture[str]) -> None:
    driver = TestbedDriver("slurm-testbed", _Rm(), testbed=_Testbed(""), interval=0.01)  # type: ignore[arg-type]
    ticks = iter([False, False, True])
    driver.wait(lambda: next(ticks), "b at 3 nodes")
    driver.wait(lambda: True, "c ended")
    assert [what for _, what in driver.waited] == ["b at 3 nodes", "c ended"]
    assert driver.waited[0][0] >= 0.02  # two ticks of 0.01 s
    driver.report_waits()
    out = capsys.readouterr().out
    assert out.startswith("slurm-testbed: 2 waits, longest [(") and "(timeout 60 s)" in out
