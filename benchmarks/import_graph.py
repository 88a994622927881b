"""The import graph of ``src/malleable``: floors, upward imports and cycles.

Run ``python3 benchmarks/import_graph.py`` (``--json`` for machine-readable output).
It reads the source with :mod:`ast` (nothing is imported), maps every module to a
*room* (a top-level module or subpackage of ``malleable``), and reports:

* the room graph (which room imports which), counting imports at module level, inside
  functions and under ``if TYPE_CHECKING:`` alike (a type-only import is a dependency
  too: a cycle through one is a cycle; ``--skip-type-checking`` shows the graph without
  them, as this script drew it before issue 35);
* the **floor** of each room: 0 for a room that imports no other room, else one more
  than the highest floor it imports (rooms in a cycle share one floor);
* **upward imports**: arrows against the layering that ``../shared/DESIGN.md`` draws
  (:data:`LAYERS`: the core at the bottom, then policies, the manager, the two
  worlds, the composition root and the CLI on top), and arrows between the two
  worlds (:data:`APART`: the simulator and the adapters never import each other);
  a room missing from :data:`LAYERS` is reported as such;
* **cycles**: strongly connected sets of modules (module level, so a cycle inside a
  room counts too) and of rooms.
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
from collections import defaultdict
from collections.abc import Iterable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1] / "src"
PACKAGE = "malleable"

#: The intended layer of each room (DESIGN.md, "Rooms"): a room may import rooms on its
#: own layer or below, never above.
LAYERS: dict[str, int] = {
    "__init__": 0, "errors": 0, "model": 0, "argtypes": 0, "compiling": 0,
    "resources": 1, "apps": 1, "clock": 1, "faults": 1, "kinds": 1,
    "config": 2, "policies": 2, "metrics": 2, "workloads": 2,
    "manager": 3, "health": 3, "mpi": 3,
    "store": 4, "realtime": 4,
    "sim": 5, "adapters": 5, "testbed": 5,
    "runner": 6, "coorm": 6,
    "service": 7, "experiments": 7, "site": 7,
    "commands": 8, "cli": 9, "__main__": 10,
}

#: Rooms on one layer that must not import each other (the two worlds).
APART: list[tuple[str, str]] = [("sim", "adapters"), ("adapters", "sim")]


def modules(root: Path) -> dict[str, Path]:
    """Every module of the package by dotted name."""
    found: dict[str, Path] = {}
    for path in sorted((root / PACKAGE).rglob("*.py")):
        parts = list(path.relative_to(root).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _type_checking_lines(tree: ast.AST) -> set[int]:
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.body:
                lines.update(range(child.lineno, (child.end_lineno or child.lineno) + 1))
    return lines


def imports_of(name: str, path: Path, known: set[str],
               type_checking: bool = True) -> set[str]:
    """The package modules ``name`` imports (those under ``if TYPE_CHECKING:`` too unless
    ``type_checking`` is False)."""
    tree = ast.parse(path.read_text(), str(path))
    skip = _type_checking_lines(tree) if not type_checking else set()
    is_package = path.name == "__init__.py"
    found: set[str] = set()
    for node in ast.walk(tree):
        if getattr(node, "lineno", None) in skip:
            continue
        for target in _targets(node, name, is_package):
            resolved = _resolve(target, known)
            if resolved and resolved != name:
                found.add(resolved)
    return found


def _targets(node: ast.AST, name: str, is_package: bool) -> Iterator[str]:
    if isinstance(node, ast.Import):
        yield from (alias.name for alias in node.names)
    elif isinstance(node, ast.ImportFrom):
        base = node.module or ""
        if node.level:
            parts = name.split(".")
            keep = len(parts) - node.level + (1 if is_package else 0)
            base = ".".join(parts[:keep] + ([base] if base else []))
        yield base
        yield from (f"{base}.{alias.name}" for alias in node.names)


def _resolve(target: str, known: set[str]) -> str | None:
    while target:
        if target in known:
            return target
        target = target.rpartition(".")[0]
    return None


def room(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else "__init__"


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm, iterative; components of more than one node."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    top = stack.pop()
                    on_stack.discard(top)
                    component.append(top)
                    if top == node:
                        break
                if len(component) > 1:
                    out.append(sorted(component))
    return out


def floors(graph: dict[str, set[str]], cycles: Iterable[list[str]]) -> dict[str, int]:
    """Floor of every node; the members of a cycle share one."""
    group = {node: node for node in graph}
    for members in cycles:
        for node in members:
            group[node] = members[0]
    condensed: dict[str, set[str]] = defaultdict(set)
    for node, targets in graph.items():
        condensed[group[node]]
        for target in targets:
            if group[target] != group[node]:
                condensed[group[node]].add(group[target])
    memo: dict[str, int] = {}

    def floor_of(node: str) -> int:
        if node not in memo:
            memo[node] = 1 + max((floor_of(t) for t in condensed[node]), default=-1)
        return memo[node]

    return {node: floor_of(group[node]) for node in graph}


def analyse(root: Path = ROOT, type_checking: bool = True) -> dict[str, object]:
    mods = modules(root)
    known = set(mods)
    module_graph = {name: imports_of(name, path, known, type_checking)
                    for name, path in mods.items()}
    room_graph: dict[str, set[str]] = defaultdict(set)
    for name, targets in module_graph.items():
        room_graph[room(name)]
        for target in targets:
            if room(target) != room(name) and room(target) != "__init__":
                room_graph[room(name)].add(room(target))
    room_cycles = strongly_connected(room_graph)
    room_floors = floors(room_graph, room_cycles)
    in_cycle = {node: i for i, members in enumerate(room_cycles) for node in members}
    upward = sorted(
        (src, dst) for src, targets in room_graph.items() for dst in targets
        if LAYERS.get(dst, 99) > LAYERS.get(src, 99) or (src, dst) in APART
    )
    return {
        "modules": len(mods),
        "rooms": {r: {"floor": room_floors[r], "imports": sorted(room_graph[r])}
                  for r in sorted(room_graph, key=lambda r: (room_floors[r], r))},
        "room_cycles": room_cycles,
        "module_cycles": strongly_connected(module_graph),
        "upward_imports": [list(pair) for pair in upward],
        "unlayered_rooms": sorted(r for r in room_graph if r not in LAYERS),
        "cycle_arrows": sum(1 for src, targets in room_graph.items() for dst in targets
                            if src in in_cycle and in_cycle.get(dst) == in_cycle[src]),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.add_argument("--root", type=Path, default=ROOT, help="the src/ directory")
    parser.add_argument("--skip-type-checking", action="store_true",
                        help="leave out imports under `if TYPE_CHECKING:` (the old count)")
    args = parser.parse_args(argv)
    result = analyse(args.root, type_checking=not args.skip_type_checking)
    if args.json:
        print(json.dumps(result, indent=2))
        return 0
    rooms = result["rooms"]
    assert isinstance(rooms, dict)
    print(f"{result['modules']} modules in {len(rooms)} rooms")
    for name, info in rooms.items():
        print(f"  floor {info['floor']:2d}  {name:12s} -> {', '.join(info['imports']) or '-'}")
    print(f"room cycles: {len(result['room_cycles'])}  "  # type: ignore[arg-type]
          f"{result['room_cycles']}")
    print(f"module cycles: {len(result['module_cycles'])}")  # type: ignore[arg-type]
    for members in result["module_cycles"]:  # type: ignore[attr-defined]
        print("  " + " <-> ".join(members))
    print(f"upward imports (against DESIGN.md's layers, or between the worlds): "
          f"{len(result['upward_imports'])}")  # type: ignore[arg-type]
    for src, dst in result["upward_imports"]:  # type: ignore[attr-defined]
        print(f"  {src} -> {dst}")
    print(f"rooms with no layer: {result['unlayered_rooms'] or '-'}")
    print(f"arrows inside room cycles: {result['cycle_arrows']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
