"""Seeded `malleable simulate` outputs, pinned byte for byte (sha256 of jobs.csv and
summary.json) for a few policies on the 300-job wm-prime workload, seed 1.

The simulated clusters answer every grow and shrink at once (never "pending",
:data:`malleable.resources.PENDING`): the asynchronous answers of the real adapters must
not move a simulation by one byte. A change that moves one of these is a change of
behaviour: check it is meant, then update the digests (and say so in the commit).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from malleable.cli import main

CASES = {
    "fcfs": (["--policy", "fcfs"],
             "6388bd6eb41edfe2fc6be33c9ee1bbe1e781737a1453cee23144125f2023635b",
             "6f198284572ef5296e7d282ad3594420b2a5043ae8102b1e433a94ad369acc48"),
    "easy": (["--policy", "easy"],
             "57d59aee79975adcd1ad49894cb70e329f8dd64619cba3b001e117caf3445bb1",
             "a00d32e3d4a9e8bfdb6b2ef9d168a58a77661b220fc63bd99972c51789fc98e8"),
    "fpsma-pwa": (["--policy", "fpsma", "--approach", "pwa"],
                  "e21c9cdb6fbbca5474e9dc56590b93e7c58907c2c9b49b41ee9ba904feff9bf8",
                  "c74ed4b31d6f2b4abf14cc670dfbbdaf7ca4cae39188fd72cbca6593786624a3"),
    "egs-pwa": (["--policy", "egs", "--approach", "pwa"],
                "ec962f54c11da5a67aff7148921c5a7953bc4ac09105188e7753db2396cae212",
                "21bd675d305edaed7fa6f89504a8eb8b65e28e23438500a207613fce449cd1ef"),
}


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize("name", list(CASES))
def test_simulate_outputs_are_byte_identical(name: str, tmp_path: Path,
                                             capsys: pytest.CaptureFixture[str]) -> None:
    options, jobs_sha, summary_sha = CASES[name]
    out = tmp_path / name
    rc = main(["simulate", *options, "--workload", "wm-prime", "--seed", "1", "--out", str(out)])
    capsys.readouterr()
    assert rc == 0
    assert len((out / "jobs.csv").read_text().splitlines()) == 301  # 300 jobs and a header
    assert _sha(out / "jobs.csv") == jobs_sha
    assert _sha(out / "summary.json") == summary_sha
