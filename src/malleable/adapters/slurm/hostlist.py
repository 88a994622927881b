"""Slurm host lists (``vu-n[001-004,007],uva-n1``) to and from node names: pure functions.

Slurm writes a job's nodes as a host list expression; choosing which nodes a job keeps
(``scontrol update JobId=X NodeList=...``) needs the names one by one. Only the forms
Slurm prints are read: comma-separated items, each a prefix, at most one bracketed
range list, and a suffix; ranges keep their zero padding.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

_ITEM = re.compile(r"([^\[\],]*)(?:\[([0-9,\-]+)\])?([^\[\],]*)")


#: The most node names one host list may expand to: far above any site's node count, so
#: that a list from a broken or hostile source (``n[0-99999999999]``, a few bytes) is
#: refused before it is expanded, not held in memory name by name.
MAX_NAMES = 65_536


class HostlistError(ValueError):
    """A host list that is not of the form Slurm prints (or expands past :data:`MAX_NAMES`)."""


def expand(text: str) -> list[str]:
    """The node names of a host list, in its order (``"a[1-2],b"`` -> ``[a1, a2, b]``)."""
    names: list[str] = []
    pos, text = 0, text.strip()
    while pos < len(text):
        match = _ITEM.match(text, pos)
        if match is None or match.end() == pos:
            raise HostlistError(f"not a Slurm host list: {text!r}")
        prefix, ranges, suffix = match.groups()
        if ranges is None:
            names.append(prefix + suffix)
        else:
            names.extend(prefix + number + suffix
                         for number in _numbers(ranges, text, MAX_NAMES - len(names)))
        if len(names) > MAX_NAMES:
            raise HostlistError(f"host list names more than {MAX_NAMES:,} nodes: "
                                f"{text[:80]!r}")
        pos = match.end()
        if pos < len(text):
            if text[pos] != ",":
                raise HostlistError(f"not a Slurm host list: {text!r}")
            pos += 1
    return [n for n in names if n]


def _numbers(ranges: str, text: str, room: int) -> Iterable[str]:
    """The numbers of a bracketed range list; HostlistError once they would be more than
    ``room`` (checked per range before it is expanded)."""
    for part in ranges.split(","):
        low, dash, high = part.partition("-")
        if not low.isdigit() or (dash and not high.isdigit()):
            raise HostlistError(f"bad range {part!r} in host list {text[:80]!r}")
        if not dash:
            room -= 1
            yield low
            continue
        first, last = int(low), int(high)
        if last < first:
            raise HostlistError(f"descending range {part!r} in host list {text[:80]!r}")
        room -= last - first + 1
        if room < 0:
            raise HostlistError(f"host list names more than {MAX_NAMES:,} nodes: "
                                f"{text[:80]!r}")
        width = len(low)
        for number in range(first, last + 1):
            yield str(number).zfill(width)


def join(names: Iterable[str]) -> str:
    """A host list Slurm reads back: the names separated by commas."""
    return ",".join(names)
