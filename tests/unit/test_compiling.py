"""The compiled build's class attributes cost a pure-Python install nothing."""

from __future__ import annotations

import importlib
import sys

import pytest

import malleable.compiling


def test_without_mypy_extensions_the_decorator_leaves_the_class_as_it_is(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "mypy_extensions", None)  # import fails
    try:
        plain = importlib.reload(malleable.compiling)

        class Policy:
            pass

        assert plain.mypyc_attr(allow_interpreted_subclasses=True)(Policy) is Policy
        assert plain.mypyc_attr(native_class=False)(Policy) is Policy
    finally:
        monkeypatch.undo()
        importlib.reload(malleable.compiling)


def test_with_mypy_extensions_it_is_its_own() -> None:
    mypy_extensions = pytest.importorskip("mypy_extensions")
    assert malleable.compiling.mypyc_attr is mypy_extensions.mypyc_attr
