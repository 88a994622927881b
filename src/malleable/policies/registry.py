"""Find policies by name: built-ins and plug-ins of the ``malleable.policies`` group.

An entry point names a factory: ``factory(**options) -> Policy``. A plug-in that
fails to load is logged and skipped. Every command builds its policy through
:func:`make` (from a :class:`PolicySpec`: ``--policy NAME --policy-option KEY=VALUE``
on the command line, or a ``[policy]`` table in a clusters config): an unknown name
or option is an :class:`~malleable.errors.InputError` listing the valid ones.

Options are checked against the factory's signature: a factory with named
parameters accepts exactly those (a value of the wrong type is refused; an int is
taken for a float); a factory that takes ``**options`` validates them itself (AC-DS).
On the command line a value is read as a TOML value when it parses as one
(``quantum=60``, ``levels=["site","group"]``, ``multiples=false``), else as a string
(``approach=pwa``).
"""

from __future__ import annotations

import importlib
import inspect
import logging
import tomllib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from malleable.errors import InputError
from malleable.policies.base import Policy

logger = logging.getLogger(__name__)

GROUP = "malleable.policies"

#: Built-in policies (also declared as entry points in pyproject.toml).
BUILTIN: dict[str, str] = {
    "fpsma": "malleable.policies.factories:fpsma",
    "egs": "malleable.policies.factories:egs",
    "equipartition": "malleable.policies.factories:equipartition",
    "dmr": "malleable.policies.dmr:dmr",
    "easy": "malleable.policies.easy:easy",
    "easy-dmr": "malleable.policies.dmr_study:easy_dmr",
    "fcfs": "malleable.policies.factories:fcfs",
    "acds": "malleable.policies.hierarchical.factories:acds",
}

Factory = Callable[..., Policy]

_NO_OPTIONS: Mapping[str, Any] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class PolicySpec:
    """A policy by name with its options, as a command or a config asks for it."""

    name: str
    options: Mapping[str, Any] = field(default_factory=lambda: _NO_OPTIONS)

    def with_options(self, extra: Mapping[str, Any]) -> PolicySpec:
        """The same policy, ``extra`` options overriding this one's."""
        return PolicySpec(self.name, MappingProxyType({**self.options, **extra}))

    def build(self, source: str | None = None) -> Policy:
        """The policy object (see :func:`make`)."""
        return make(self.name, source=source, **self.options)

    def label(self) -> str:
        """``name`` or ``name(k=v, ...)`` for logs and tables."""
        if not self.options:
            return self.name
        return f"{self.name}({', '.join(f'{k}={v!r}' for k, v in self.options.items())})"


def _load(target: str) -> Factory:
    module, _, attr = target.partition(":")
    factory: Factory = getattr(importlib.import_module(module), attr)
    return factory


def _targets() -> dict[str, str]:
    from importlib.metadata import entry_points  # only here: importing it is not free

    targets = dict(BUILTIN)
    for ep in entry_points(group=GROUP):
        targets.setdefault(ep.name, ep.value)
    return targets


def names() -> list[str]:
    """Every registered policy name (loading nothing), sorted."""
    return sorted(_targets())


def available() -> dict[str, Factory]:
    """Every policy that loads, by name (built-ins first)."""
    found: dict[str, Factory] = {}
    for name, target in _targets().items():
        try:
            found[name] = _load(target)
        except Exception as exc:  # a broken plug-in must not break the others
            logger.warning("policy plug-in %s (%s) failed to load: %s", name, target, exc)
    return found


def factory(name: str, source: str | None = None) -> Factory:
    """The factory of ``name``; InputError listing the valid names when unknown or broken."""
    target = BUILTIN.get(name)  # a built-in needs no look at the installed packages
    if target is None:
        targets = _targets()
        if name not in targets:
            raise InputError(f"unknown policy {name!r}; valid: {', '.join(sorted(targets))}",
                             source=source)
        target = targets[name]
    try:
        return _load(target)
    except Exception as exc:
        raise InputError(f"policy {name!r} ({target}) failed to load: {exc}",
                         source=source) from None


def make(name: str, source: str | None = None, **options: Any) -> Policy:
    """Build the policy ``name`` with ``options``; InputError for an unknown name or option."""
    build = factory(name, source)
    check_options(name, build, options, source)
    try:
        return build(**options)
    except InputError:
        raise
    except (TypeError, ValueError) as exc:
        raise InputError(f"policy {name}: {exc}", source=source) from None


def option_names(build: Factory) -> list[str] | None:
    """The options a factory takes by name, or None when it takes ``**options``."""
    params = inspect.signature(build).parameters.values()
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        return None
    return [p.name for p in params
            if p.kind in (inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)]


def check_options(name: str, build: Factory, options: Mapping[str, Any],
                  source: str | None = None) -> None:
    """InputError naming the valid options when ``options`` has one ``build`` does not take."""
    valid = option_names(build)
    if valid is None:
        return
    unknown = sorted(set(options) - set(valid))
    if unknown:
        offered = ", ".join(valid) if valid else "none"
        raise InputError(f"policy {name} has no option {', '.join(unknown)}; valid: {offered}",
                         source=source)
    hints = _hints(build)
    for key, value in options.items():
        _check_type(name, key, value, hints.get(key), source)


def _hints(build: Factory) -> dict[str, Any]:
    try:
        return dict(inspect.get_annotations(build, eval_str=True))
    except Exception:  # an annotation that does not evaluate: no type check
        return {}


def _check_type(name: str, key: str, value: Any, hint: Any, source: str | None) -> None:
    if hint not in (bool, int, float, str):
        return
    ok = ((isinstance(value, hint) and not (hint is int and isinstance(value, bool)))
          or (hint is float and isinstance(value, int) and not isinstance(value, bool)))
    if not ok:
        raise InputError(f"policy {name} option {key} must be {hint.__name__}, not "
                         f"{type(value).__name__} {value!r}", source=source)


def parse_option(text: str) -> tuple[str, Any]:
    """``KEY=VALUE`` from the command line; the value read as TOML when it parses as TOML."""
    key, sep, raw = text.partition("=")
    key = key.strip()
    if not sep or not key:
        raise InputError(f"--policy-option {text!r}: write KEY=VALUE (e.g. approach=pwa)")
    try:
        value = tomllib.loads(f"v = {raw.strip()}")["v"]
    except tomllib.TOMLDecodeError:
        value = raw.strip()
    return key, value


def parse_options(texts: Iterable[str]) -> dict[str, Any]:
    """Several ``KEY=VALUE`` in order (a later one overrides an earlier one)."""
    return dict(parse_option(text) for text in texts)


def describe(build: Factory) -> str:
    """The first line of a factory's docstring."""
    doc = (build.__doc__ or "").strip()
    return doc.splitlines()[0] if doc else ""
