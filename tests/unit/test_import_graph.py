"""The rooms keep DESIGN.md's layering: no import cycles, no upward imports, the two worlds
(simulator and adapters) apart, every room on a layer (benchmarks/import_graph.py)."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from benchmarks import import_graph  # noqa: E402


def test_no_cycles_and_no_upward_imports() -> None:
    graph = import_graph.analyse(ROOT / "src")
    assert graph["room_cycles"] == []
    assert graph["module_cycles"] == []
    assert graph["upward_imports"] == []
    assert graph["unlayered_rooms"] == []


def test_the_analysis_sees_an_upward_import_and_a_cycle(tmp_path: Path) -> None:
    package = tmp_path / "malleable"
    (package / "sim").mkdir(parents=True)
    (package / "adapters").mkdir()
    (package / "__init__.py").write_text("")
    (package / "model.py").write_text("from malleable.manager import Manager\n")
    (package / "manager.py").write_text("import malleable.model\n")
    (package / "sim" / "__init__.py").write_text("from malleable.adapters import x\n")
    (package / "adapters" / "__init__.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import malleable.sim\n")
    graph = import_graph.analyse(tmp_path)
    # the type-only import counts: sim and adapters import each other
    assert graph["room_cycles"] == [["adapters", "sim"], ["manager", "model"]]
    assert ["model", "manager"] in graph["upward_imports"]  # type: ignore[operator]
    assert ["sim", "adapters"] in graph["upward_imports"]  # type: ignore[operator]
    assert ["adapters", "sim"] in graph["upward_imports"]  # a type-only import counts too
    skipped = import_graph.analyse(tmp_path, type_checking=False)
    assert ["adapters", "sim"] not in skipped["upward_imports"]  # type: ignore[operator]
    assert skipped["room_cycles"] == [["manager", "model"]]
