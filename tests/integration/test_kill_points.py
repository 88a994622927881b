"""kill -9 of ``malleable manager run`` at journal boundaries, on the real testbed.

A subset of ``benchmarks/bench_killpoints.py`` (which runs 24 points): a submission
whose Slurm id was never journaled, an expansion cut between giving the helper's nodes
and the job taking them up, and a submission cut before its sbatch. After each kill the
same command takes the run up; then sacct on every site must show exactly one COMPLETED
Slurm job per workload job, and no helper may be left in any queue.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from benchmarks.bench_killpoints import run_point

from malleable.testbed import Testbed

pytestmark = [pytest.mark.integration, pytest.mark.timeout(1200)]

POINTS = ("submit.after:2", "handover.given:1", "submit.before:3")


@pytest.mark.parametrize("point", POINTS)
def test_killed_at_a_boundary_nothing_lost_doubled_or_orphaned(
        small_testbed: Testbed, tmp_path: Path, point: str) -> None:
    config = tmp_path / "clusters.toml"
    config.write_text(small_testbed.config_toml())
    result = run_point(point, config, small_testbed, 6, tmp_path, [])
    print(f"\n{point}: {result}")
    assert result.killed, f"the run never reached {point}"
    assert result.resumed_rc == 0
    assert result.jobs == 6 and result.completed == 6
    assert (result.lost, result.duplicated, result.orphans) == ([], {}, [])
