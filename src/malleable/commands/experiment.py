"""``malleable experiment NAME``: reproduce a paper's experiments.

An experiment's module (its options, figures and their plotting libraries) is imported
only when that experiment is chosen: ``malleable --help`` and the other commands never
load matplotlib for it.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
from collections.abc import Sequence
from typing import Any

from malleable.experiments import EXPERIMENTS, executor


class _LazyExperiments(argparse._SubParsersAction):  # type: ignore[type-arg]
    """Sub-parsers whose options are added (the module imported) when one is chosen."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: str | Sequence[Any] | None, option_string: str | None = None) -> None:
        if isinstance(values, Sequence) and values and str(values[0]) in EXPERIMENTS:
            _populate(self._name_parser_map[str(values[0])], str(values[0]))
        super().__call__(parser, namespace, values, option_string)


def _populate(p: argparse.ArgumentParser, name: str) -> None:
    if p.get_default("func") is not None:
        return
    mod = importlib.import_module(EXPERIMENTS[name][0])
    mod.add_arguments(p)
    executor.add_arguments(p)
    p.set_defaults(func=_runner(mod))


def register(sub: Any) -> None:
    parser = sub.add_parser(
        "experiment", help="reproduce a paper's experiments (figures, report, --json)",
        description="Run the experiments behind a paper's figures, draw them as PNG and write "
                    "a report that sets the results beside the paper's findings.",
    )
    parser.register("action", "lazy_parsers", _LazyExperiments)
    exp_sub = parser.add_subparsers(dest="experiment", metavar="NAME", action="lazy_parsers")
    exp_sub.required = True
    for name, (module, summary) in EXPERIMENTS.items():
        if importlib.util.find_spec(module) is None:
            continue  # not built yet
        exp_sub.add_parser(name, help=summary, description=summary)


def _runner(mod: Any) -> Any:
    def run(args: argparse.Namespace) -> int:
        executor.from_args(args)  # checked before any output (--executor slurm off a cluster)
        return int(mod.run(args))

    return run
