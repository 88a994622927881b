#!/usr/bin/env python3
"""The compiled build (setup.py; docs/simulate.md, "Compiled build"), made beside a copy of
this checkout, for the benchmarks and for CI's tests of it (.ci/compiled-tests.sh).

    python3 benchmarks/compiled.py DEST     # prints DEST/tree: run it with PYTHONPATH=DEST/tree/src

The wheel is built as a user would build it (``MALLEABLE_COMPILE=1 pip wheel
--no-build-isolation``), from a copy of the working tree (the build writes ``build/``).
Its compiled modules are then put beside the copy's sources (an extension module is
imported before a ``.py`` of the same name), so that anything run from the copy, tests and
their subprocesses with ``PYTHONPATH=src`` among them, runs the compiled build. Needs mypy
and wheel (the ``dev`` extra) and a C compiler; about 35 s on 2 cores.

Both :func:`build` and :func:`source` (the plain sources, for the benchmarks' source runs)
also write the bytecode of every ``.py`` of the copy, as ``pip install`` does: a run then
does not compile the modules it imports from their sources first (about 0.03 s, where
``PYTHONDONTWRITEBYTECODE`` is set, as on this machine), as a run of an installed package
does not, and as AccaSim, installed in its own environment, does not either.
"""

from __future__ import annotations

import compileall
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def build(dest: Path) -> Path:
    """Build the compiled wheel into ``dest``; the copy of the checkout that runs it."""
    tree, wheels = dest / "tree", dest / "wheel"
    shutil.rmtree(dest, ignore_errors=True)
    _copy_checkout(tree)
    subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps",
                    "--no-build-isolation", "-w", str(wheels), "."], cwd=tree, check=True,
                   env={**os.environ, "MALLEABLE_COMPILE": "1"})
    (wheel,) = wheels.glob("malleable-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        compiled = [n for n in archive.namelist() if n.endswith(".so")]
        if not any(n.startswith("malleable/manager.") for n in compiled):
            raise RuntimeError(f"{wheel.name} has no compiled malleable.manager")
        for name in compiled:
            archive.extract(name, tree / "src")
    _bytecode(tree / "src")
    return tree


def source(dest: Path, root: Path = ROOT) -> Path:
    """A copy of the checkout's (or ``root``'s) plain sources (``src/``, without bytecode or
    compiled modules, whatever is beside them) in ``dest``, with their bytecode; its ``src``."""
    shutil.rmtree(dest, ignore_errors=True)
    shutil.copytree(root / "src", dest / "src",
                    ignore=shutil.ignore_patterns("__pycache__", "*.so", "*.pyc"))
    _bytecode(dest / "src")
    return dest / "src"


def _copy_checkout(tree: Path) -> None:
    """The files git knows of (tracked, or new and not ignored) copied into ``tree``."""
    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others",
                             "--exclude-standard"], cwd=ROOT, check=True,
                            capture_output=True).stdout.decode().split("\0")
    for name in filter(None, listed):
        path = ROOT / name
        if path.is_file():  # a file deleted but not yet committed is skipped
            (tree / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, tree / name)


def _bytecode(src: Path) -> None:
    """Each ``.py`` under ``src`` compiled to its ``__pycache__`` (RuntimeError on failure)."""
    if not compileall.compile_dir(src, quiet=1):
        raise RuntimeError(f"compileall failed under {src}")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit("usage: compiled.py DEST")
    print(build(Path(sys.argv[1]).resolve()))
