"""What the DMRlib study ran: the four versions of Table 3 and the :class:`Study` record.

The figures, the key numbers and the report read a :class:`Study`; they import it
from here, never from the experiment's entry module (which imports them).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from malleable.experiments.dmrlib.study import Outcome
from malleable.workloads.dmrlib import ALL, NONE, Mix, Submission, Version

#: (submission, mix) of each Table 3 version.
VERSIONS: dict[Version, tuple[Submission, Mix]] = {
    Version.FIXED: (Submission.RIGID, NONE),
    Version.PURE_MOLDABLE: (Submission.MOLDABLE, NONE),
    Version.PURE_MALLEABLE: (Submission.RIGID, ALL),
    Version.FLEXIBLE: (Submission.MOLDABLE, ALL),
}


@dataclass
class Study:
    """What the study ran: the options and the outcome of each setup (seeds averaged)."""

    sizes: tuple[int, ...]
    table7_jobs: int
    seeds: tuple[int, ...]
    source: str
    options: dict[str, Any]
    outcomes: dict[tuple[int, Submission, str], Outcome] = field(default_factory=dict)
    elapsed: float = 0.0

    def get(self, jobs: int, submission: Submission, mix: Mix) -> Outcome:
        return self.outcomes[(jobs, submission, mix.name)]

    def version(self, jobs: int, version: Version) -> Outcome:
        submission, mix = VERSIONS[version]
        return self.get(jobs, submission, mix)


def versions() -> Iterator[Version]:
    """The four versions in the paper's order."""
    return iter(VERSIONS)
