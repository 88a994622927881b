"""The ``malleable`` command.

Each family of subcommands lives in its own module, which exposes
``register(subparsers)``; the module adds its parsers and sets ``func`` on each
(``func(args) -> int``). Exit codes:

0 success · 1 unexpected failure · 2 bad input or usage · 3 a cluster, command
or container failed · 4 infeasible request · 130 interrupted (README.md).
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from collections.abc import Sequence

from malleable import __version__
from malleable.errors import MalleableError

logger = logging.getLogger(__name__)

#: Modules that contribute subcommands, in the order they appear in ``--help``.
COMMAND_MODULES: tuple[str, ...] = (
    "malleable.commands.simulate",
    "malleable.commands.experiment",
    "malleable.commands.policies",
    "malleable.commands.testbed",
    "malleable.commands.resize",
    "malleable.commands.manager",
    "malleable.commands.coorm",
    "malleable.commands.app",
)


class _Parser(argparse.ArgumentParser):
    """argparse that exits with 2 and one line, as every other input error."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The whole parser, or (``command`` naming one of ours) one with that command only.

    Each command module is named after the command it registers; importing them all
    costs a simulation ~1 s of its run (plots, SSH, containers), so ``main`` imports
    only the one asked for.
    """
    parser = _Parser(prog="malleable", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"malleable {__version__}")
    parser.add_argument(
        "-v", "--verbose", action="count", default=0,
        help="log more (-v: info and tracebacks, -vv: debug)",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    sub.required = True
    modules = [m for m in COMMAND_MODULES if m.rsplit(".", 1)[-1] == command] or COMMAND_MODULES
    for name in modules:
        importlib.import_module(name).register(sub)
    return parser


def _command(argv: Sequence[str]) -> str | None:
    """The command word of ``argv`` (its first argument that is not an option)."""
    for arg in argv:
        if not arg.startswith("-"):
            return arg
    return None


def _configure_logging(verbosity: int) -> None:
    level = logging.WARNING if verbosity == 0 else logging.INFO if verbosity == 1 else logging.DEBUG
    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(_command(argv))
    args = parser.parse_args(argv)
    _configure_logging(args.verbose)
    try:
        return int(args.func(args))
    except MalleableError as exc:
        if args.verbose:
            logger.exception("failed")
        print(f"malleable: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("malleable: interrupted", file=sys.stderr)
        return 130
    except Exception as exc:  # a bug: one line, traceback with -v
        if args.verbose:
            logger.exception("unexpected failure")
        print(f"malleable: unexpected error: {type(exc).__name__}: {exc} (rerun with -v for the"
              " traceback)", file=sys.stderr)
        return 1
