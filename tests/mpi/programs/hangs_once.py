"""Test program: on its first run in a directory it hangs in a function named like the
library's spawn (``_spawn``), or with ``--elsewhere`` in another one; later runs end at once.
It exercises the MPI tests' handling of Open MPI's intermittent spawn hang."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from mpi4py import MPI


def _spawn(marker: Path) -> None:
    hang_once(marker)


def elsewhere(marker: Path) -> None:
    hang_once(marker)


def hang_once(marker: Path) -> None:
    if MPI.COMM_WORLD.rank == 0 and not marker.exists():
        marker.write_text("hung once\n")
        while True:
            time.sleep(1)


def main() -> None:
    (elsewhere if "--elsewhere" in sys.argv else _spawn)(Path("hung-once"))
    MPI.COMM_WORLD.Barrier()


if __name__ == "__main__":
    main()
