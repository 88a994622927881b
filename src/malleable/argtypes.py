"""Checked ``type=`` converters for command-line options (argparse turns the
``ArgumentTypeError`` into one usage line and exit code 2).

Kept free of any other import, so that every command and experiment can use them
while the parser is built.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable


def _whole(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None


def seed(text: str) -> int:
    """A random seed: a whole number >= 0 (a negative seed would silently equal its
    absolute value in Python's :mod:`random`)."""
    value = _whole(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"{value} is negative: a seed is a whole number >= 0")
    return value


def positive(text: str) -> int:
    """A whole number >= 1 (a count)."""
    value = _whole(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value}: give a whole number >= 1")
    return value


def port(text: str) -> int:
    """A TCP port to bind: a whole number in [0, 65535] (0: any free port)."""
    value = _whole(text)
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"{value} is not a port: give a whole number in "
                                         "[0, 65535] (0: any free port)")
    return value


def bounded(low: int, high: int) -> Callable[[str], int]:
    """A converter for a whole number in [low, high] (a count that must stay tractable)."""
    def convert(text: str) -> int:
        value = _whole(text)
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{value}: give a whole number in [{low}, {high:,}]")
        return value
    return convert
