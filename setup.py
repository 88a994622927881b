"""Build hook: the compiled build by default (docs/simulate.md, "Compiled build").

``pip install .`` compiles the modules of the simulator's hot path below to C extensions
with mypyc (part of mypy, a build requirement in pyproject.toml), the way black and mypy
ship theirs: the same source, the same ``Manager`` and policy objects, type-checked at run
time by the compiled code. Where it cannot (no C compiler or no Python headers), the
install goes on as pure Python and says so, with how to get the fast build.

``MALLEABLE_COMPILE`` chooses: unset or ``auto`` (compile when a C compiler works, else
pure), ``1`` (compile, or fail), ``0`` (pure). An editable install (``pip install -e``)
is always pure Python: its modules are the checkout's sources, edited in place.
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

from setuptools import setup
from setuptools.command.build_ext import build_ext

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

PURE_NOTE = ("malleable: installing pure Python ({why}); the simulator runs 2.5-4x faster "
             "compiled: install a C compiler and the Python headers (Debian: gcc python3-dev) "
             "and reinstall (`pip install .`); see docs/simulate.md, \"Compiled build\"")


def _say(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _editable() -> bool:
    """Whether setuptools is building an editable install (PEP 660)."""
    return any(arg in ("editable_wheel", "develop") for arg in sys.argv[1:])


def _building() -> bool:
    """Whether setuptools is building the package (not only reading its metadata, which
    pip asks for first: mypyc type-checks and translates the sources, so only once)."""
    return any(arg in ("bdist_wheel", "build", "build_ext", "install") for arg in sys.argv[1:])


def _compiler_problem() -> str:
    """Why no C extension can be built here ("" when one can): a C file that includes
    Python.h compiled with the compiler setuptools would use."""
    from setuptools._distutils import sysconfig
    from setuptools._distutils.ccompiler import new_compiler

    compiler = new_compiler()
    sysconfig.customize_compiler(compiler)  # type: ignore[no-untyped-call]
    with tempfile.TemporaryDirectory() as tmp:
        source = Path(tmp) / "probe.c"
        source.write_text("#include <Python.h>\nint probe(void) { return 0; }\n")
        try:
            compiler.compile([str(source)], output_dir=tmp,
                             include_dirs=[sysconfig.get_python_inc()])
        except Exception as exc:  # noqa: BLE001 (CompileError, from whichever distutils)
            return f"no working C compiler or Python headers: {str(exc).splitlines()[0][:120]}"
    return ""


class _OptionalBuildExt(build_ext):
    """build_ext that, unless ``MALLEABLE_COMPILE=1``, falls back to pure Python when the
    extensions fail to build, leaving none of them behind (a partly compiled package would
    not import)."""

    def run(self) -> None:
        try:
            super().run()
        except Exception as exc:  # noqa: BLE001 (any build failure: fall back, say why)
            if os.environ.get("MALLEABLE_COMPILE") == "1":
                raise
            for ext in self.extensions:
                Path(self.get_ext_fullpath(ext.name)).unlink(missing_ok=True)
            self.extensions = []
            _say(PURE_NOTE.format(why=f"the compiled build failed: {exc}"))


def _ext_modules() -> list[object]:
    mode = os.environ.get("MALLEABLE_COMPILE", "auto")
    if mode == "0" or not _building() or (mode != "1" and _editable()):
        return []
    try:
        from mypyc.build import mypycify
    except ImportError:
        if mode == "1":
            raise
        _say(PURE_NOTE.format(why="mypy is not in the build environment"))
        return []
    if mode != "1":
        problem = _compiler_problem()
        if problem:
            _say(PURE_NOTE.format(why=problem))
            return []
    try:
        return list(mypycify(COMPILED, opt_level="3"))
    except (Exception, SystemExit) as exc:  # mypy's errors end in SystemExit
        if mode == "1":
            raise
        _say(PURE_NOTE.format(why=f"mypyc could not compile the sources: {exc!r}"))
        return []


setup(ext_modules=_ext_modules(), cmdclass={"build_ext": _OptionalBuildExt})
