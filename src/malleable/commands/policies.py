"""``malleable policies list``: the policies this installation offers."""

from __future__ import annotations

import argparse
from typing import Any

from rich.console import Console
from rich.table import Table

from malleable.policies.registry import available, describe


def register(sub: Any) -> None:
    p = sub.add_parser("policies", help="list the scheduling policies (built-in and plug-ins)",
                       description="List the policies of the malleable.policies group.")
    psub = p.add_subparsers(dest="action", metavar="ACTION")
    psub.required = True
    lst = psub.add_parser("list", help="print each policy with the first line of its docs")
    lst.set_defaults(func=run_list)


def run_list(args: argparse.Namespace) -> int:
    table = Table(title="malleable policies")
    table.add_column("name")
    table.add_column("what it does")
    for name, factory in sorted(available().items()):
        table.add_row(name, describe(factory))
    Console().print(table)
    return 0
