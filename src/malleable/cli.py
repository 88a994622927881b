"""The ``malleable`` command.

Building the parser imports no plotting, SSH or array library (matplotlib, paramiko,
numpy): a command imports what it needs when it runs, so ``--help`` starts at once.
Each family of subcommands lives in its own module, which exposes
``register(subparsers)``; the module adds its parsers and sets ``func`` on each
(``func(args) -> int``). Exit codes:

0 success · 1 unexpected failure · 2 bad input or usage · 3 a cluster, command
or container failed · 4 infeasible request · 5 a ``manager run`` ended with failed
jobs · 130 interrupted (README.md).
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys
from collections.abc import Sequence
from pathlib import Path

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
    "malleable.commands.submit",
    "malleable.commands.coorm",
    "malleable.commands.app",
)


DESCRIPTION = (
    "Schedule malleable parallel jobs (jobs that grow and shrink while they run): simulate "
    "any policy on modelled clusters, reproduce the published experiments, run the "
    "malleability manager on real Slurm sites, launch malleable MPI applications, and bring "
    "up a containerized multi-cluster Slurm testbed."
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
    parser = _Parser(prog="malleable", description=DESCRIPTION,
                     epilog="Exit codes: 0 success, 1 unexpected failure, 2 bad input or usage, "
                            "3 a cluster, command or container failed, 4 infeasible request, "
                            "5 a `manager run` ended with failed jobs or jobs cancelled outside "
                            "it, 130 interrupted. `malleable COMMAND --help` for each command.")
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


class _HumanFormatter(logging.Formatter):
    """``malleable: warning: message``, as the error lines (no timestamp, no logger name)."""

    def format(self, record: logging.LogRecord) -> str:
        return f"malleable: {record.levelname.lower()}: {record.getMessage()}"


def _command(argv: Sequence[str]) -> str | None:
    """The command word of ``argv`` (its first argument that is not an option)."""
    for arg in argv:
        if not arg.startswith("-"):
            return arg
    return None


def _configure_logging(verbosity: int) -> None:
    """Warnings in the errors' one-line style; with -v (info) or -vv (debug), timestamps
    and logger names too."""
    level = logging.WARNING if verbosity == 0 else logging.INFO if verbosity == 1 else logging.DEBUG
    handler = logging.StreamHandler()
    handler.setFormatter(_HumanFormatter() if verbosity == 0 else logging.Formatter(
        "%(asctime)s %(levelname)s %(name)s: %(message)s"))
    logging.basicConfig(level=level, handlers=[handler])


def _created_by(out: object) -> list[Path]:
    """The directories a command would create for ``--out`` (deepest first)."""
    if not isinstance(out, Path):
        return []
    missing = []
    for path in (out, *out.parents):
        if path.exists():
            break
        missing.append(path)
    return missing


def _remove_empty(dirs: list[Path]) -> None:
    """Remove the directories of ``dirs`` a failed command created and left empty."""
    for path in dirs:
        try:
            path.rmdir()
        except OSError:  # not empty, or gone: keep what is there
            return


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(_command(argv))
    args = parser.parse_args(argv)
    _configure_logging(args.verbose)
    new_dirs = _created_by(getattr(args, "out", None))
    code = _run(args)
    if code != 0:
        _remove_empty(new_dirs)
    return code


def _run(args: argparse.Namespace) -> int:
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
