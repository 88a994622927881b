"""The adapter registry: site kinds by name, built-ins and plug-ins of the
``malleable.adapters`` entry-point group, and the one assembly point every command uses.

A kind is an :class:`AdapterKind`: its name and, for each *use*, the ``module:attr`` of the
builder that makes its object for that use (loaded only when asked for, so a simulation
never imports paramiko and this module imports no adapter):

``commands``
    ``builder(site) -> ctl``: the site's commands over SSH, or local without a host (no
    I/O yet). A kind may reach a site by other *transports* too: ``transports`` names the
    builder of each (Slurm's ``rest``: slurmrestd); a site configured with one
    (``transport = "rest"``) gets its commands from that builder (:func:`commands`).
``run``
    ``builder(site, ctl, context) -> ResourceManager``: a site of ``malleable manager run``.
``serve``
    ``builder(site, ctl, context) -> site``: a site of ``malleable manager serve``.
``coorm``
    ``builder(site, ctl, context) -> ResourceManager``: a site of CooRM's real mode.
``coorm_busy``
    ``reader(cid, site, now, offset, managed) -> [Busy]``: CooRM's view of that site.
``submit``
    ``copy(sub, tag, target) -> submit``: ``malleable submit``'s copy of a job on a site of
    the kind; making it checks everything (InputError), calling ``submit()`` submits it and
    returns the site's job id (:func:`malleable.site.submit.submit_to`).
``testbed``
    The kind's :class:`~malleable.testbed.sitekinds.TestbedKind` (an object, not a
    builder): its containers, configuration, node states, diagnostics and clusters-config
    keys in ``malleable testbed`` (:mod:`malleable.testbed.sitekinds`).

A third-party adapter is a package with one entry point in the group, naming its
:class:`AdapterKind` (``[project.entry-points."malleable.adapters"] pbs =
"malleable_pbs:KIND"``); ``kind = "pbs"`` in a clusters config then selects it. A plug-in
that fails to load is logged and skipped; an unknown kind, or a kind that has no builder
for a use, is an :class:`~malleable.errors.InputError` naming the valid ones. Commands
call :func:`build`; nothing else branches on a site's kind.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from malleable.errors import InputError

logger = logging.getLogger(__name__)

GROUP = "malleable.adapters"

#: The uses a kind may have a builder for (see the module docstring).
USES = ("commands", "run", "serve", "coorm", "coorm_busy", "submit", "testbed")


@dataclass(frozen=True, slots=True)
class AdapterKind:
    """A site kind: its name and the builder of each of its uses (``module:attr``)."""

    name: str
    builders: Mapping[str, str]
    label: str = ""
    """How messages name the kind (default: the name)."""
    transports: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    """Transports besides SSH/local, by name: the ``module:attr`` of ``builder(site) ->
    ctl`` for a site configured with it."""

    def __post_init__(self) -> None:
        unknown = sorted(set(self.builders) - set(USES))
        if unknown:
            raise ValueError(f"adapter kind {self.name}: unknown uses {unknown}; valid: "
                             f"{', '.join(USES)}")


@dataclass(frozen=True, slots=True)
class Context:
    """What every builder of a run, service or CooRM site is given besides its site."""

    clock: Any
    """The run's :class:`~malleable.clock.ScaledClock`."""
    run_id: str
    journal: Any = None
    """The run's :class:`~malleable.store.Store` (None: not journaled)."""
    time_scale: float = 1.0
    options: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))
    """Per-use extras (none yet; e.g. a per-site transport)."""


SLURM = AdapterKind("slurm", MappingProxyType({
    "commands": "malleable.adapters.slurm.sites:ctl_for",
    "run": "malleable.service:slurm_run_site",
    "serve": "malleable.site.assembly:slurm_site",
    "coorm": "malleable.coorm.real:slurm_site",
    "coorm_busy": "malleable.coorm.real:slurm_busy",
    "submit": "malleable.site.submit:slurm_copy",
    "testbed": "malleable.testbed.sitekinds:SLURM",
}), "Slurm", MappingProxyType({"rest": "malleable.adapters.slurm.sites:rest_ctl"}))

OAR = AdapterKind("oar", MappingProxyType({
    "commands": "malleable.adapters.oar.sites:oar_ctl_for",
    "run": "malleable.service:oar_run_site",
    "serve": "malleable.site.assembly:oar_site",
    "coorm": "malleable.coorm.real:oar_site",
    "coorm_busy": "malleable.coorm.real:oar_busy",
    "submit": "malleable.site.submit:oar_copy",
    "testbed": "malleable.testbed.sitekinds:OAR",
}), "OAR")

#: Built-in kinds (also declared as entry points in pyproject.toml), in the order messages
#: list them.
BUILTIN: dict[str, AdapterKind] = {SLURM.name: SLURM, OAR.name: OAR}

#: The kind of a site whose config names none (``kind`` is optional in a clusters config).
DEFAULT = SLURM.name


def _plugins() -> dict[str, str]:
    from importlib.metadata import entry_points  # only here: importing it is not free

    return {ep.name: ep.value for ep in entry_points(group=GROUP) if ep.name not in BUILTIN}


def names() -> list[str]:
    """Every registered kind (loading nothing): built-ins first, then plug-ins, sorted."""
    return [*BUILTIN, *sorted(_plugins())]


def _load(target: str) -> Any:
    module, _, attr = target.partition(":")
    return getattr(importlib.import_module(module), attr)


def kind(name: str, source: str | None = None) -> AdapterKind:
    """The kind ``name``; InputError listing the valid kinds when unknown or broken."""
    found = BUILTIN.get(name)
    if found is not None:
        return found
    plugins = _plugins()
    if name not in plugins:
        raise InputError(f"unknown kind {name!r}; valid: {', '.join(names())}", source=source)
    try:
        loaded = _load(plugins[name])
    except Exception as exc:  # a broken plug-in: one line, not a traceback
        logger.warning("adapter plug-in %s (%s) failed to load: %s", name, plugins[name], exc)
        raise InputError(f"adapter kind {name!r} ({plugins[name]}) failed to load: {exc}",
                         source=source) from None
    if not isinstance(loaded, AdapterKind) or loaded.name != name:
        raise InputError(f"adapter kind {name!r} ({plugins[name]}) is not an AdapterKind "
                         f"named {name!r}", source=source)
    return loaded


def with_use(use: str) -> list[str]:
    """The kinds that have a builder for ``use`` (a plug-in that fails to load is left out)."""
    able = []
    for name in names():
        try:
            if use in kind(name).builders:
                able.append(name)
        except InputError:
            continue
    return able


def builder(kind_name: str, use: str, what: str = "") -> Any:
    """The builder of ``use`` for a kind (InputError when the kind has none: ``what`` says
    who asked, e.g. "the site service")."""
    found = kind(kind_name)
    target = found.builders.get(use)
    if target is None:
        able = [k for k in names() if use in kind(k).builders] if use != "commands" else []
        raise InputError(f"{what or use}: kind {kind_name!r} cannot be used here"
                         + (f"; valid: {', '.join(able)}" if able else ""))
    return _load(target)


def transport(site: Any) -> str:
    """The transport a configured site is reached by: ``rest`` (slurmrestd) or ``ssh``
    (SSH, or local commands for a site without a host)."""
    return "rest" if getattr(site, "rest", None) is not None else "ssh"


def commands(site: Any, what: str = "", as_kind: str | None = None) -> Any:
    """``site``'s commands, over the transport it is configured with (InputError when its
    kind has no such transport). ``as_kind`` names the kind whose commands a command that
    drives one kind only wants (``malleable resize``: ``slurm``) whatever the site's kind."""
    name = as_kind or site.kind
    way = transport(site)
    if way == "ssh":
        return builder(name, "commands", what)(site)
    target = kind(name).transports.get(way)
    if target is None:
        able = [k for k in names() if way in kind(k).transports]
        raise InputError(f"{what or 'commands'}: kind {name!r} has no transport {way!r}"
                         + (f"; valid: {', '.join(able)}" if able else ""))
    return _load(target)(site)


def build(use: str, site: Any, context: Context | None = None, ctl: Any = None,
          what: str = "") -> Any:
    """The one assembly point: ``site``'s object for ``use`` (its commands made by
    :func:`commands` unless ``ctl`` is given)."""
    if use == "commands":
        return commands(site, what)
    make = builder(site.kind, use, what)
    if ctl is None:
        ctl = commands(site, what)
    return make(site, ctl, context)


def has_transport(kind_name: str, way: str) -> bool:
    """Whether a kind's sites may be reached by transport ``way`` (``ssh`` for every kind;
    InputError for an unknown kind)."""
    return way == "ssh" or way in kind(kind_name).transports


def label(kind_name: str) -> str:
    """How messages name a kind (``Slurm``, ``OAR``; a plug-in's label or name)."""
    found = BUILTIN.get(kind_name)
    return (found.label or found.name) if found is not None else kind_name
