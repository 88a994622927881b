"""``malleable experiment elastic``'s options, apart from its runs.

Imported to build the parser (``--help``): it loads no simulator, numpy or plotting
library; the runs (:mod:`.experiment`) are imported only when the experiment runs.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from malleable import argtypes

#: The keys of :data:`.runs.POLICIES`, in order, named here so that ``--help`` does not load
#: the simulator (a unit test keeps the two equal).
POLICY_KEYS = ("easy-largest", "dmr", "easy-dmr", "fpsma-pra", "fpsma-pwa", "egs-pra",
               "egs-pwa", "equipartition", "acds", "easy-preferred", "easy-minimum",
               "fpsma-pra-cap2", "egs-pra-cap2")
#: The keys of :data:`.runs.BASELINES` (a unit test keeps the two equal).
BASELINE_KEYS = ("easy", "fcfs")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", type=Path, required=True, metavar="DIR",
                        help="directory for the figures (PNG), report.md and summary.json")
    parser.add_argument("--trace", type=Path, metavar="LOG",
                        help="a real SWF log (.swf or .swf.gz), e.g. theta_2022.swf.gz "
                             "(or --lublin)")
    parser.add_argument("--lublin", type=int, metavar="JOBS",
                        help="instead of --trace: JOBS jobs of the Lublin-Feitelson model "
                             "(written to DIR/lublin-JOBS-seedS.swf; the whole log is the "
                             "slice)")
    parser.add_argument("--lublin-nodes", type=int, default=128, metavar="N",
                        help="the Lublin model's machine (default 128 nodes)")
    parser.add_argument("--lublin-seed", type=argtypes.seed, default=1, metavar="S",
                        help="seed of the Lublin model's jobs (default 1)")
    parser.add_argument("--size-range", choices=("logged", "full"), default="logged",
                        help="malleable sizes: logged (ceil(p/2)..2p, default) or full "
                             "(1..the machine)")
    parser.add_argument("--baseline", choices=BASELINE_KEYS, default="easy",
                        help="the rigid log's scheduler the changes are against (default "
                             "easy)")
    parser.add_argument("--malleable-fraction", default="0,20,50,100", metavar="LIST",
                        help="percentages of the jobs made malleable (default 0,20,50,100)")
    parser.add_argument("--policies", default=",".join(POLICY_KEYS),
                        metavar="LIST", help="malleable policies to run (default: all: "
                        + ", ".join(POLICY_KEYS) + ")")
    parser.add_argument("--reps", type=int, default=3, metavar="N",
                        help="seeds per fraction (which jobs are malleable; default 3)")
    parser.add_argument("--seed", type=argtypes.seed, default=1,
                        help="the first seed (default 1)")
    parser.add_argument("--slice-start", type=float, default=30.0, metavar="DAY",
                        help="first day of the log's slice (default 30: past the start-up "
                             "of the log's first month)")
    parser.add_argument("--slice-days", type=float, default=28.0, metavar="DAYS",
                        help="days in the slice (default 28)")
    parser.add_argument("--quick", action="store_true",
                        help="1 seed, a 7-day slice: a smoke run in seconds")
    parser.add_argument("--workers", type=int, default=1, metavar="N",
                        help="simulate on N worker processes (default 1)")
    parser.add_argument("--json", action="store_true", help="print summary.json's content")
