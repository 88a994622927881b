"""``mypyc_attr``, how a class is compiled in the compiled build (setup.py): mypy_extensions'
own where it is installed (it comes with mypy, which the build needs), else a decorator that
does nothing, so that a pure-Python install (a site's Debian packages, the testbed images)
needs no package for it."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from mypy_extensions import mypyc_attr as mypyc_attr
else:
    try:
        from mypy_extensions import mypyc_attr
    except ImportError:  # pure Python: the attributes mean nothing

        def mypyc_attr(*attrs, **named):
            return lambda cls: cls
