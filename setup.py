"""Build hook for the optional compiled build (docs/simulate.md, "Compiled build").

A plain install is pure Python. With ``MALLEABLE_COMPILE=1`` the modules of the simulator's
hot path below are compiled to C extensions with mypyc (part of mypy), the way black and mypy
ship theirs: the same source, the same ``Manager`` and policy objects, type-checked at run
time by the compiled code. It needs mypy and a C compiler in the build environment:

    pip install mypy && MALLEABLE_COMPILE=1 pip install --no-build-isolation .
"""

from __future__ import annotations

import os

from setuptools import setup

#: The compiled modules: the manager's cycle, the simulated cluster and engine, the policies
#: the benchmarks run, and the records. Every one is also run and tested as plain Python.
#: A compiled class takes no patched method, and no interpreted subclass but for the policy
#: classes (marked ``allow_interpreted_subclasses``: a policy to build on); a compiled module
#: binds the names it calls early. Tests that need such doubles wrap the object or reach it
#: otherwise.
COMPILED = [
    "src/malleable/manager.py",
    "src/malleable/sim/cluster.py",
    "src/malleable/sim/engine.py",
    "src/malleable/sim/run.py",
    "src/malleable/sim/model_options.py",
    "src/malleable/sim/background.py",
    "src/malleable/policies/base.py",
    "src/malleable/policies/fcfs.py",
    "src/malleable/policies/easy.py",
    "src/malleable/policies/koala.py",
    "src/malleable/policies/malleability.py",
    "src/malleable/metrics/records.py",
    "src/malleable/metrics/summary.py",
    "src/malleable/model.py",
    "src/malleable/workloads/swf_plain.py",
    "src/malleable/apps.py",
]


def _ext_modules() -> list[object]:
    if os.environ.get("MALLEABLE_COMPILE", "") != "1":
        return []
    from mypyc.build import mypycify  # only when asked: a plain install needs no mypy

    return list(mypycify(COMPILED, opt_level="3"))


setup(ext_modules=_ext_modules())
