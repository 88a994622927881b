"""setup.py's choice of build (docs/simulate.md, "Compiled build"): compiled where a C
compiler works, else pure Python with one message saying why and how to get the fast one.

These build a wheel without build isolation (the build requirements are the dev extra's)
and with the compiler made to fail (``CC=false``), so they take seconds (pip -v: pip shows a
build's messages only then, or on failure); the compiled
build itself is built and tested by .ci/compiled-tests.sh.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _checkout(tmp_path: Path) -> Path:
    """The files a build reads, copied (a build writes build/ and egg-info beside them)."""
    tree = tmp_path / "tree"
    tree.mkdir()
    for name in ("setup.py", "pyproject.toml", "README.md", "MANIFEST.in"):
        shutil.copy2(ROOT / name, tree / name)
    shutil.copytree(ROOT / "build_backend", tree / "build_backend",
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(ROOT / "src", tree / "src",
                    ignore=shutil.ignore_patterns("__pycache__", "*.so", "*.egg-info"))
    return tree


def _wheel(tree: Path, **env: str) -> tuple[list[str], str]:
    pytest.importorskip("wheel")
    out = tree.parent / "wheel"
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-v", "--no-deps", "--no-build-isolation",
         "-w", str(out), "."], cwd=tree, capture_output=True, text=True, timeout=300,
        env={k: v for k, v in os.environ.items() if k != "MALLEABLE_COMPILE"} | env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    (wheel,) = out.glob("malleable-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        return archive.namelist(), proc.stderr + proc.stdout


def test_without_a_working_compiler_the_install_is_pure_and_says_how(tmp_path: Path) -> None:
    pytest.importorskip("mypyc")
    names, output = _wheel(_checkout(tmp_path), CC="false")
    assert "malleable/manager.py" in names
    assert not [n for n in names if n.endswith(".so")]
    assert "installing pure Python (no working C compiler" in output.replace("\n", " ")
    assert "gcc python3-dev" in output


def test_malleable_compile_0_is_pure_without_asking_the_compiler(tmp_path: Path) -> None:
    names, output = _wheel(_checkout(tmp_path), MALLEABLE_COMPILE="0", CC="false")
    assert not [n for n in names if n.endswith(".so")]
    assert "installing pure Python" not in output  # asked for: nothing to explain
