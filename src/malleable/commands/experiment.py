"""``malleable experiment NAME``: reproduce a paper's experiments.

Building the parser imports an experiment's ``options`` module only (when that experiment
is named): its runs, the simulator, numpy and the plotting libraries, and the executor,
are imported when it runs, so ``--help`` starts at once.
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Sequence
from typing import Any

from malleable.errors import InputError
from malleable.experiments import EXPERIMENTS, executor_options


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
    importlib.import_module(options_module(name)).add_arguments(p)
    executor_options.add_arguments(p)
    p.set_defaults(func=_runner(EXPERIMENTS[name][0]))


def options_module(name: str) -> str:
    """The module with experiment ``name``'s options: ``options`` beside its runs."""
    return EXPERIMENTS[name][0].rsplit(".", 1)[0] + ".options"


def register(sub: Any) -> None:
    parser = sub.add_parser(
        "experiment", help="reproduce a paper's experiments (figures, report, --json)",
        description="Run the experiments behind a paper's figures, draw them as PNG and write "
                    "a report that sets the results beside the paper's findings.",
    )
    parser.register("action", "lazy_parsers", _LazyExperiments)
    exp_sub = parser.add_subparsers(dest="experiment", metavar="NAME", action="lazy_parsers")
    exp_sub.required = True
    for name, (_, summary) in EXPERIMENTS.items():
        exp_sub.add_parser(name, help=summary, description=summary)


#: The most repetitions, and jobs per workload, an experiment is asked for: beyond, a sweep
#: runs for days (``koala --reps 100000000`` ran silently until killed); refused, exit 2.
MAX_REPS = 1000
MAX_JOBS = 100_000
#: Each experiment's options (their attribute and flag) that set the size of its sweep.
LOAD_FLAGS = {"koala": (("reps", "--reps", MAX_REPS),),
              "acds": (("reps", "--reps", MAX_REPS), ("jobs", "--job-counts", MAX_JOBS)),
              "dmrlib": (("reps", "--reps", MAX_REPS), ("jobs", "--sizes", MAX_JOBS)),
              "coorm": (("jobs", "--jobs-per-pack", MAX_JOBS),),
              "elastic": (("reps", "--reps", MAX_REPS),)}


def bound_loads(args: argparse.Namespace) -> None:
    """InputError for a sweep far beyond any paper's (see :data:`MAX_REPS`)."""
    for attr, flag, limit in LOAD_FLAGS.get(str(getattr(args, "experiment", "")), ()):
        value = getattr(args, attr, None)
        if isinstance(value, str):  # acds: FIRST:LAST:STEP (its own checks follow)
            parts = value.split(":")
            values = [int(p) for p in parts[:2] if p.strip().isdigit()]
        elif isinstance(value, list | tuple):
            values = [v for v in value if isinstance(v, int)]
        else:
            values = [value] if isinstance(value, int) else []
        for v in values:
            if v > limit:
                raise InputError(f"{flag} {value if isinstance(value, str) else v}: at most "
                                 f"{limit:,} (a sweep that would run for days)")


def _runner(module: str) -> Any:
    def run(args: argparse.Namespace) -> int:
        from malleable.experiments import executor

        bound_loads(args)
        executor.from_args(args)  # checked before any output (--executor slurm off a cluster)
        return int(importlib.import_module(module).run(args))

    return run
