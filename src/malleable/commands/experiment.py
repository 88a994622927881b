"""``malleable experiment NAME``: reproduce a paper's experiments."""

from __future__ import annotations

import argparse
import importlib
import importlib.util
from typing import Any

from malleable.experiments import EXPERIMENTS


def register(sub: Any) -> None:
    parser = sub.add_parser(
        "experiment", help="reproduce a paper's experiments (figures, report, --json)",
        description="Run the experiments behind a paper's figures, draw them as PNG and write "
                    "a report that sets the results beside the paper's findings.",
    )
    exp_sub = parser.add_subparsers(dest="experiment", metavar="NAME")
    exp_sub.required = True
    for name, (module, summary) in EXPERIMENTS.items():
        if importlib.util.find_spec(module) is None:
            continue  # not built yet
        mod = importlib.import_module(module)
        p = exp_sub.add_parser(name, help=summary, description=summary)
        mod.add_arguments(p)
        p.set_defaults(func=_runner(mod))


def _runner(mod: Any) -> Any:
    def run(args: argparse.Namespace) -> int:
        return int(mod.run(args))

    return run
