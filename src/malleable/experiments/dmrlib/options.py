"""``malleable experiment dmrlib``'s options, apart from its runs.

Imported to build the parser (``--help``): it loads no simulator, numpy or plotting
library; the runs (:mod:`.experiment`) are imported only when the experiment runs.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from malleable import argtypes

#: The workload sizes (jobs) of the study, and of --quick.
SIZES = (100, 250, 500, 1000, 2000)
QUICK_SIZES = (20, 40)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", type=Path, required=True, metavar="DIR",
                        help="directory for the figures (PNG), table7.md/csv, summary.json (also "
                             "as results.json, its older name) and report.md")
    parser.add_argument("--sizes", dest="jobs", type=int, nargs="+", metavar="N",
                        help=f"workload sizes, in jobs, one workload per size (default "
                             f"{' '.join(map(str, SIZES))})")
    # the older spelling, kept working but not shown
    parser.add_argument("--jobs", dest="jobs", type=int, nargs="+", help=argparse.SUPPRESS)
    parser.add_argument("--table7-jobs", type=int, metavar="N",
                        help="workload size of Table 7 and Fig. 5 (default 1000)")
    parser.add_argument("--seed", type=argtypes.seed, default=1, help="first seed (default 1)")
    parser.add_argument("--reps", type=int, default=1, metavar="N",
                        help="workloads drawn per size, with seeds --seed..--seed+N-1, "
                             "results averaged (default 1, as the paper's single runs)")
    # the older spelling, kept working but not shown
    parser.add_argument("--seeds", dest="reps", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--interarrival", type=float, default=10.0, metavar="S",
                        help="mean inter-arrival time of Feitelson's model at factor 1 "
                             "(default 10 s)")
    parser.add_argument("--factor", type=float, default=1.0,
                        help="Feitelson arrival factor, multiplies inter-arrival times "
                             "(default 1)")
    parser.add_argument("--reconfig-cost", type=float, default=1.0, metavar="S",
                        help="seconds without progress at each resize (default 1)")
    parser.add_argument("--any-size", action="store_true",
                        help="let resizes go to any size, not only multiples/divisors of the "
                             "current one")
    parser.add_argument("--reading", choices=("both", "literal", "pooled"), default="both",
                        help="Algorithm 2's reading: both (default: the literal one, then the "
                             "pooled one on the malleable workloads, side by side in "
                             "report.md), literal (a job's own shrink must let a waiting job "
                             "start) or pooled (several jobs' shrinks toward their preferred "
                             "sizes add up)")
    parser.add_argument("--pooled", dest="reading", action="store_const", const="pooled",
                        help="the same as --reading pooled")
    parser.add_argument("--swf", type=Path, metavar="PATH",
                        help="take arrivals and sizes from an SWF trace instead of Feitelson's "
                             "model (see docs/dmrlib.md for the rule)")
    parser.add_argument("--quick", action="store_true",
                        help=f"small workloads ({' and '.join(map(str, QUICK_SIZES))} jobs) "
                             "for a run of seconds")
    parser.add_argument("--json", action="store_true",
                        help="print the key numbers as one JSON object")
