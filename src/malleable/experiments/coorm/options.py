"""``malleable experiment coorm``'s options, apart from its runs.

Imported to build the parser (``--help``): it loads no simulator, numpy or plotting
library; the runs (:mod:`.experiment`) are imported only when the experiment runs.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from malleable import argtypes


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", required=True, type=Path,
                        help="directory for fig6.png, fig7.png, report.md and summary.json "
                             "(also as results.json, its older name)")
    parser.add_argument("--json", action="store_true",
                        help="print the key numbers per cluster count as JSON on stdout")
    parser.add_argument("--quick", action="store_true",
                        help="a tiny version (2 small clusters, 20 jobs) that runs in seconds")
    parser.add_argument("--clusters", default=None,
                        help="cluster counts for Fig. 6, e.g. 1-8 or 1,2,4,8 (default 1-8)")
    parser.add_argument("--instances", type=int, default=None,
                        help="workload instances per point of Fig. 6 (default 2)")
    parser.add_argument("--jobs-per-pack", dest="jobs", type=int, default=None, metavar="N",
                        help="jobs per pack, the size of each workload instance (default 200, "
                             "20 with --quick)")
    # the older spelling, kept working but not shown
    parser.add_argument("--jobs", dest="jobs", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--hosts", type=int, default=None, help="hosts per cluster (default 128)")
    parser.add_argument("--delays", default=None,
                        help="CEM adaptation delays for Fig. 7, seconds (default 0,2,4,6,8,10)")
    parser.add_argument("--fig7-clusters", type=int, default=None,
                        help="cluster count for Fig. 7 (default 4)")
    parser.add_argument("--fig7-instances", type=int, default=None,
                        help="W1 instances for Fig. 7 (default 4)")
    parser.add_argument("--seed", type=argtypes.seed, default=1, help="random seed (default 1)")
    parser.add_argument("--swf", type=Path, default=None,
                        help="take legacy jobs from this SWF trace instead of the model")
    parser.add_argument("--swf-cores-per-host", type=int, default=1,
                        help="processors per host in the SWF trace (LLNL Atlas: 8)")
    parser.add_argument("--workers", type=int, default=1, metavar="N",
                        help="worker processes that run the simulations in parallel "
                             "(default 1)")
