"""A release built as docs/release.md says (``python3 -m build``), for the integration tests.

The checkout's release files are copied first (the build leaves the tree clean); a
``version_suffix`` is added to ``__version__`` in the copy's ``src/malleable/__init__.py``,
the one place the version is written, to make a newer release of the same code.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
#: What the sdist is made from (MANIFEST.in, pyproject.toml).
RELEASE_FILES = ("pyproject.toml", "setup.py", "README.md", "LICENSE", "CHANGELOG.md",
                 "MANIFEST.in")


def build_release(dest: Path, version_suffix: str = "", *, timeout: float = 600) -> Path:
    """Build the sdist and the wheel into ``dest``; the wheel's path."""
    tree = dest / "tree"
    shutil.copytree(REPO / "src", tree / "src",
                    ignore=shutil.ignore_patterns("__pycache__", "*.so", "*.egg-info"))
    shutil.copytree(REPO / "examples", tree / "examples",
                    ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(REPO / "build_backend", tree / "build_backend",
                    ignore=shutil.ignore_patterns("__pycache__"))
    for name in RELEASE_FILES:
        shutil.copy2(REPO / name, tree / name)
    if version_suffix:
        init = tree / "src" / "malleable" / "__init__.py"
        text, count = re.subn(r'(?m)^__version__ = "([^"]+)"',
                              rf'__version__ = "\g<1>{version_suffix}"', init.read_text())
        assert count == 1, "no __version__ line in malleable/__init__.py"
        init.write_text(text)
    # --no-isolation: the installed setuptools and wheel (offline; docs/release.md);
    # MALLEABLE_COMPILE=0: the pure, portable wheel a release is (not the compiled build)
    subprocess.run([sys.executable, "-m", "build", "--no-isolation", "--outdir",
                    str(dest / "dist"), str(tree)], check=True, timeout=timeout,
                   capture_output=True, env={**os.environ, "MALLEABLE_COMPILE": "0"})
    shutil.rmtree(tree)
    (wheel,) = (dest / "dist").glob("malleable-*.whl")
    return wheel
