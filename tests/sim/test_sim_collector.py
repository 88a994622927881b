"""A simulation eases the garbage collector while it runs and restores it after."""

from __future__ import annotations

import gc

from malleable.model import DAS3
from malleable.policies.koala import KoalaPolicy
from malleable.sim.run import collector_eased, simulate
from malleable.workloads.koala import koala_workload


def test_a_run_restores_the_collector_settings() -> None:
    before = gc.get_threshold()
    seen: list[tuple[tuple[int, int, int], int]] = []

    def spy() -> None:
        seen.append((gc.get_threshold(), gc.get_freeze_count()))

    with collector_eased():
        spy()
    assert seen[0][0][0] >= 10_000 and seen[0][1] > 0
    result = simulate(koala_workload("wm", 1), DAS3, KoalaPolicy())
    assert len(result.records) == 300
    assert gc.get_threshold() == before and gc.get_freeze_count() == 0


def test_the_collector_is_restored_when_a_run_fails() -> None:
    before = gc.get_threshold()
    try:
        with collector_eased():
            raise RuntimeError("boom")
    except RuntimeError:
        pass
    assert gc.get_threshold() == before and gc.get_freeze_count() == 0


def test_simulate_reads_its_workload_with_the_collector_eased(monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    import malleable.workloads.load as load
    from malleable.cli import main

    real = load.simulation_input  # what `simulate` reads its workload (and a log's header) with
    seen: list[tuple[int, int, bool]] = []

    def spy(name: str, seed: int):  # type: ignore[no-untyped-def]
        seen.append((gc.get_threshold()[0], gc.get_freeze_count(), gc.isenabled()))
        return real(name, seed)

    monkeypatch.setattr(load, "simulation_input", spy)
    before = gc.get_threshold()
    assert gc.isenabled()
    assert main(["simulate", "--workload", "wm", "--json"]) == 0
    assert '"jobs": 300' in capsys.readouterr().out
    assert seen and seen[0][0] >= 10_000 and seen[0][1] > 0
    assert seen[0][2] is False  # paused while the workload is read
    assert gc.get_threshold() == before and gc.get_freeze_count() == 0 and gc.isenabled()


def test_a_paused_collector_comes_back_as_it_was() -> None:
    for enabled in (True, False):
        if not enabled:
            gc.disable()
        try:
            try:
                with collector_eased(paused=True):
                    assert not gc.isenabled()
                    raise RuntimeError("boom")
            except RuntimeError:
                pass
            assert gc.isenabled() is enabled and gc.get_freeze_count() == 0
            with collector_eased():
                assert gc.isenabled() is enabled  # not paused: left as it was
        finally:
            gc.enable()
