"""kill -9 of ``malleable manager run`` at journal boundaries, on the real testbed.

A subset of ``benchmarks/bench_killpoints.py`` (which runs 30 points): a submission
whose Slurm id was never journaled, an expansion cut between giving the helper's nodes
and the job taking them up, a submission cut before its sbatch, a shrink whose
``scontrol update`` ran but whose outcome was never journaled, a cancel journaled but
never sent (the test-only ``cancelling-fpsma`` plug-in cancels ``wm-2`` and ``wm-5``),
and three external kills at seeded random moments. After each kill the same command
takes the run up; then sacct on every site must show exactly one Slurm job per workload
job, in the end state the run recorded (COMPLETED, or CANCELLED for a cancelled job),
and no helper may be left in any queue.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from benchmarks.bench_killpoints import CANCELLED, run_point

from malleable.testbed import Testbed

pytestmark = [pytest.mark.integration, pytest.mark.timeout(1200)]

POINTS = ("submit.after:2", "handover.given:1", "submit.before:3", "shrink.after:1",
          "cancel.before:1", "random:3")
"""The workload's first 8 jobs for the shrink (6 never shrink here), 6 for the others."""


@pytest.mark.parametrize("point", POINTS)
def test_killed_at_a_boundary_nothing_lost_doubled_or_orphaned(
        small_testbed: Testbed, tmp_path: Path, point: str) -> None:
    config = tmp_path / "clusters.toml"
    config.write_text(small_testbed.config_toml())
    jobs = 8 if point.startswith("shrink.") else 6
    result = run_point(point, config, small_testbed, jobs, tmp_path, [], random_kills=3)
    print(f"\n{point}: {result}")
    assert result.killed, f"the run never reached {point}"
    assert result.resumed_rc == 0
    cancelled = len(CANCELLED) if point.startswith("cancel.") else 0
    assert result.jobs == jobs and (result.completed, result.cancelled) == (
        jobs - cancelled, cancelled)
    assert (result.lost, result.duplicated, result.orphans) == ([], {}, [])
