"""``malleable experiment acds``'s options, apart from its runs.

Imported to build the parser (``--help``): it loads no simulator, numpy or plotting
library; the runs (:mod:`.experiment`) are imported only when the experiment runs.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from malleable import argtypes

#: ``DowneyParams().work_scale`` (:mod:`malleable.sim.quantum.jobs`), named here so that
#: ``--help`` does not load the simulator (a unit test keeps the two equal).
DEFAULT_WORK_SCALE = 1e-3


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", type=Path, required=True, metavar="DIR",
                        help="directory for the PNG figures, report.md and summary.json")
    parser.add_argument("--json", action="store_true",
                        help="print the key numbers per figure as one JSON object")
    parser.add_argument("--reps", type=int, default=None, metavar="N",
                        help="repetitions per point (default 10, as the paper; 2 with --quick)")
    parser.add_argument("--quick", action="store_true",
                        help="a tiny sweep (few job counts and QFs, 2 repetitions) in seconds")
    parser.add_argument("--job-counts", dest="jobs", default=None, metavar="FIRST:LAST:STEP",
                        help="the sweep's job counts, FIRST to LAST by STEP (default 20:500:20, "
                             "the paper's grid; 20:500:40 halves the time)")
    # the older spelling, kept working but not shown
    parser.add_argument("--jobs", dest="jobs", help=argparse.SUPPRESS)
    parser.add_argument("--seed", type=argtypes.seed, default=1, help="base seed of every scenario")
    parser.add_argument("--work-scale", type=float, default=None, metavar="X",
                        help=f"quanta L per Downey node-second (default "
                             f"{DEFAULT_WORK_SCALE:g}, 1e-4 with --quick; see "
                             f"docs/acds.md)")
    parser.add_argument("--min-parallelism", type=float, default=None, metavar="A",
                        help="lower end of the log-uniform average parallelism (default 1, "
                             "Table 1's [1, 256]); e.g. 16: the contention-bound regime, "
                             "a tuning, not the paper's setting (docs/acds.md)")
    parser.add_argument("--contention", type=float, nargs="?", const=16.0, default=None,
                        metavar="A",
                        help="also run the whole sweep in the contention-bound regime "
                             "(parallelism log-uniform in [A, 256], A = 16 if not given; a "
                             "tuning) and set both side by side in report.md; doubles the "
                             "time; its figures go to DIR/contention/")
    parser.add_argument("--integral", action="store_true",
                        help="allocate whole processors (integral DEQ) instead of fractions")
    parser.add_argument("--workers", type=int, default=1, metavar="N",
                        help="worker processes that run the sweep's scenarios in parallel "
                             "(default 1)")
