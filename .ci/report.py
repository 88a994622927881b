"""CI's test-time report: the 40 slowest tests and the time per group, from pytest's JUnit XML.

    python3 .ci/report.py OUT.xml [MORE.xml ...]

Reads the files ``.ci/run`` had pytest write (``--junitxml``; one per part of the run), and
prints the slowest tests (setup, call and teardown together: pytest's default
``junit_duration_report``) and the summed time of each module, slowest first. A missing or
unreadable file is said and skipped (pytest may have failed before writing it): the report
never changes the run's outcome.
"""

from __future__ import annotations

import sys
import xml.etree.ElementTree as ET  # our own pytest's output, not input from elsewhere
from collections import defaultdict
from pathlib import Path

SLOWEST = 40


def cases(path: Path) -> list[tuple[str, str, float]]:
    """(module or class, test name, seconds) of every test case in one JUnit file; the
    ``@group`` xdist adds to a grouped test's name is left off."""
    out = []
    for case in ET.parse(path).getroot().iter("testcase"):
        name = case.get("name", "").split("@", 1)[0]
        out.append((case.get("classname", ""), name, float(case.get("time", "0") or 0)))
    return out


def main(argv: list[str]) -> int:
    found: list[tuple[str, str, float]] = []
    for arg in argv:
        try:
            found.extend(cases(Path(arg)))
        except (OSError, ET.ParseError) as exc:
            print(f"report: cannot read {arg}: {exc}")
    if not found:
        print("report: no test times")
        return 0
    found.sort(key=lambda c: -c[2])
    print(f"-- the {min(SLOWEST, len(found))} slowest of {len(found)} tests "
          "(setup + call + teardown)")
    for module, test, seconds in found[:SLOWEST]:
        print(f"{seconds:9.1f} s  {module}::{test}")
    modules: dict[str, float] = defaultdict(float)
    for module, _, seconds in found:
        modules[module] += seconds
    print("-- time per module (summed; workers run side by side, so this is not wall time)")
    for module, seconds in sorted(modules.items(), key=lambda m: -m[1]):
        if seconds >= 1.0:
            print(f"{seconds:9.1f} s  {module}")
    print(f"{sum(modules.values()):9.1f} s  in all")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
