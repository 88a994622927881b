"""The build backend: setuptools', asking for mypy and numpy only where the compiled build
is made (setup.py; docs/simulate.md, "Compiled build").

A wheel or an sdist built for ``pip install .`` needs mypy (mypyc translates the hot modules
to C) and numpy (mypy type-checks the modules that use it); an editable install
(``pip install -e .``) is pure Python and needs neither, so pip does not fetch them for it.
``MALLEABLE_COMPILE=0`` asks for a pure build: nothing more either.
"""

from __future__ import annotations

import os
from typing import Any

from setuptools import build_meta as _setuptools
from setuptools.build_meta import *  # noqa: F403 (the whole PEP 517/660 interface)

#: What the compiled build needs beyond setuptools and wheel.
COMPILE_REQUIRES = ["mypy>=1.8", "numpy>=1.24"]


def get_requires_for_build_wheel(config_settings: dict[str, Any] | None = None) -> list[str]:
    extra = [] if os.environ.get("MALLEABLE_COMPILE") == "0" else COMPILE_REQUIRES
    return [*_setuptools.get_requires_for_build_wheel(config_settings), *extra]
