"""Test program: a grow whose spawn never returns, for the library's spawn watchdog.

The new processes run a Python that never starts MPI (``MPI_Comm_spawn`` waits for them
as it does in Open MPI's intermittent hang, openpmix#2735). The source's completion
reports go to ``reports.jsonl``. The watchdog's limit comes from
``$MALLEABLE_SPAWN_TIMEOUT``; argument 1 is a word the stuck children carry so the test can
find them.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from typing import Any

from malleable.mpi import Malleable, Params, Report, Scripted


class Recording(Scripted):
    def completed(self, report: Report) -> None:
        with open("reports.jsonl", "a") as out:
            out.write(json.dumps(dataclasses.asdict(report)) + "\n")


def main() -> None:
    stuck = [sys.executable, "-c", "import time; time.sleep(120)", sys.argv[1]]
    mall = Malleable(Params(1, 4, 1), Recording({1: 2}), command=stuck)

    def step(comm: Any, data: Any, iteration: int) -> None:
        print(f"iteration {iteration} on {comm.Get_size()}", flush=True)

    mall.run(lambda comm: {}, step, iterations=4)
    print("the run ended normally", flush=True)


if __name__ == "__main__":
    main()
