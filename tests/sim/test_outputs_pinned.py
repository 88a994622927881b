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
             "86797a5719b0940d446de7fba6b1b988233f8db46f9b8247f32e5ec4ccf8460e"),
    "easy": (["--policy", "easy"],
             "57d59aee79975adcd1ad49894cb70e329f8dd64619cba3b001e117caf3445bb1",
             "97cff90e3ce6e51252736e8b7fa8e038a4d5b45ca0a75551f00e960ff4f4b3f3"),
    "fpsma-pwa": (["--policy", "fpsma", "--approach", "pwa"],
                  "e21c9cdb6fbbca5474e9dc56590b93e7c58907c2c9b49b41ee9ba904feff9bf8",
                  "cf05cfcc4150df438fff2e961b6fe62f65a08c4c7310c07e4ff5abf10b387bac"),
    "egs-pwa": (["--policy", "egs", "--approach", "pwa"],
                "ec962f54c11da5a67aff7148921c5a7953bc4ac09105188e7753db2396cae212",
                "8e0e18610ce770657b77406803c0bb1e751393c224dd7c5314535d62da7e019f"),
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
