"""``malleable policies list``: the policies this installation offers, with their options."""

from __future__ import annotations

import argparse
import inspect
import json
from typing import Any

from malleable.policies.registry import Factory, available, describe, option_names


def register(sub: Any) -> None:
    p = sub.add_parser("policies", help="list the scheduling policies (built-in and plug-ins)",
                       description="List the policies of the malleable.policies group.")
    psub = p.add_subparsers(dest="action", metavar="ACTION")
    psub.required = True
    lst = psub.add_parser("list", help="print each policy with the first line of its docs",
                          description="Each registered policy: its name (for --policy and a "
                                      "config's [policy] table), what it does and its options.")
    lst.add_argument("--json", action="store_true",
                     help="print a JSON list of {name, description, target, options}")
    lst.set_defaults(func=run_list)


def options_of(build: Factory) -> dict[str, Any] | None:
    """Option -> default (None when it has none); None when the factory takes ``**options``."""
    names = option_names(build)
    if names is None:
        return None
    params = inspect.signature(build).parameters
    return {name: (None if params[name].default is inspect.Parameter.empty
                   else params[name].default) for name in names}


def run_list(args: argparse.Namespace) -> int:
    policies = sorted(available().items())
    if args.json:
        print(json.dumps([{"name": name, "description": describe(build),
                           "target": f"{build.__module__}:{build.__qualname__}",
                           "options": options_of(build)} for name, build in policies]))
        return 0
    from rich.console import Console
    from rich.table import Table

    table = Table(title="malleable policies")
    table.add_column("name")
    table.add_column("what it does")
    table.add_column("options (default)")
    for name, build in policies:
        table.add_row(name, describe(build), _options_text(options_of(build)))
    Console().print(table)
    return 0


def _options_text(options: dict[str, Any] | None) -> str:
    if options is None:
        return "see docs/policies.md"
    return ", ".join(f"{k}={v!r}" for k, v in options.items()) or "-"
