"""Error types shared by every part of malleable, and the exit code each maps to.

The command line turns these into one line on stderr and the exit code below
(the traceback only with ``-v``). Library code raises them; it never exits.
"""

from __future__ import annotations

from pathlib import Path


class MalleableError(Exception):
    """Base of every error malleable reports to a user."""

    exit_code = 1


class InputError(MalleableError, ValueError):
    """Bad input: a workload file, a config file, a command-line value. Exit code 2."""

    exit_code = 2

    def __init__(self, message: str, *, source: str | None = None, line: int | None = None):
        self.source = source
        self.line = line
        where = ""
        if source is not None:
            where = f"{source}:{line}: " if line is not None else f"{source}: "
        super().__init__(f"{where}{message}")


class ExternalError(MalleableError):
    """A cluster, a command or a container failed or refused. Exit code 3."""

    exit_code = 3


class InfeasibleError(MalleableError):
    """A request that can never be met (more nodes than a cluster has...). Exit code 4."""

    exit_code = 4


def read_text(path: str | Path, what: str = "file") -> str:
    """The text of a user's UTF-8 file (a leading byte-order mark dropped); InputError
    ``FILE: cannot read WHAT: ...`` or ``FILE: not UTF-8 text (...)`` otherwise."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise InputError(f"cannot read {what}: {exc.strerror or exc}", source=str(path)) from None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data[:exc.start].count(b"\n") + 1
        raise InputError(f"not UTF-8 text (byte 0x{data[exc.start]:02x} on line {line})",
                         source=str(path)) from None


class MissingExtraError(ExternalError):
    """A library of an optional extra is not installed. Exit code 3."""


def require_extra(module: str, extra: str, purpose: str) -> None:
    """Raise :class:`MissingExtraError` (one line naming the extra to install) when
    ``module`` cannot be imported; ``purpose`` says what needed it (README, "Install")."""
    import importlib.util

    try:
        found = importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):
        found = False
    if not found:
        raise MissingExtraError(f"{purpose} needs {module}, which is not installed: "
                                f"pip install 'malleable[{extra}]'")
