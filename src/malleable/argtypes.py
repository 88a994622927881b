"""Checked ``type=`` converters for command-line options (argparse turns the
``ArgumentTypeError`` into one usage line and exit code 2).

Kept free of any other import, so that every command and experiment can use them
while the parser is built.
"""

from __future__ import annotations

import argparse


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
