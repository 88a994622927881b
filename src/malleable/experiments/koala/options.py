"""``malleable experiment koala``'s options, apart from its runs.

Imported to build the parser (``--help``): it loads no simulator, numpy or plotting
library; the runs (:mod:`.experiment`) are imported only when the experiment runs.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from malleable import argtypes

#: The default windows of --background-window: quantiles of the windows' load, and the
#: busiest (:mod:`.real_load`).
DEFAULT_WINDOWS = "q50,q75,q90,max"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", type=Path, required=True, metavar="DIR",
                        help="directory for the figures (PNG), report.md and summary.json")
    parser.add_argument("--json", action="store_true",
                        help="print the key numbers and verdicts as one JSON object")
    parser.add_argument("--reps", type=int, default=None, metavar="N",
                        help="runs of every curve, with seeds --seed..--seed+N-1; a seed "
                             "draws the workload (default 4, as the paper's 4 runs; 2 with "
                             "--quick)")
    parser.add_argument("--quick", action="store_true",
                        help="a small sweep that runs in seconds: 2 runs of every curve, "
                             "the paper's setting only (24 simulations)")
    # the older spelling (seeds 1..N), kept working but not shown
    parser.add_argument("--seeds", dest="reps", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--seed", type=argtypes.seed, default=1,
                        help="the first run's seed (default 1)")
    parser.add_argument("--paper-only", "--no-sensitivity", dest="variants",
                        action="store_false",
                        help="only the paper's setting: skip the one-change variants "
                             "(local-25, local-50, reconfig-30, release-30); "
                             "--no-sensitivity is its older name")
    parser.add_argument("--sensitivity", action="store_true",
                        help="also sweep the paper's mechanisms (model options and the growth "
                             "threshold, alone and combined, levels labelled tuning) and write "
                             "sensitivity.md and sensitivity.png: under which conditions each "
                             "finding holds")
    parser.add_argument("--workers", type=int, default=1, metavar="N",
                        help="simulate on N worker processes (default 1)")
    parser.add_argument("--background-trace", type=Path, metavar="LOG",
                        help="also run every curve with a real SWF log's jobs (.swf or "
                             ".swf.gz) as local users' load on each cluster, one condition "
                             "per --background-window (real data, not the paper's setting)")
    parser.add_argument("--background-window", default=DEFAULT_WINDOWS,
                        metavar="LIST",
                        help="windows of the log: qNN (the window at that percentile of "
                             "load), max (the busiest) or a start in seconds, comma-separated "
                             f"(default {DEFAULT_WINDOWS}; 12 h each)")
