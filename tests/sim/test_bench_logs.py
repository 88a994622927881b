"""The pieces of benchmarks/bench_logs.py that decide what is compared (issue 36): the copy
of a log with run times of 0 made 1 s, and AccaSim's one-node system."""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from benchmarks import bench_logs  # noqa: E402


def test_zero_as_one_changes_run_times_of_0_only(tmp_path: Path) -> None:
    plain = tmp_path / "log.swf"
    plain.write_text("; MaxProcs: 8\n"
                     "; UnixStartTime: 0\n"
                     "1 0 5 0 4 -1 -1 4 60 -1 0 1 1 1 1 -1 -1 -1\n"
                     "2 10 0 30 4 -1 -1 4 0 -1 1 1 1 1 1 -1 -1 -1\n"
                     "3 20 0 0 8 -1 -1 8 60 -1 5 1 1 1 1 -1 -1 -1\n")
    copy = bench_logs.zero_as_one(plain)
    assert copy != plain and plain.read_text().count("\n") == 5
    lines = copy.read_text().splitlines()
    assert lines[:2] == ["; MaxProcs: 8", "; UnixStartTime: 0"]
    before = [line.split() for line in plain.read_text().splitlines()[2:]]
    after = [line.split() for line in lines[2:]]
    assert [f[3] for f in after] == ["1", "30", "1"]  # run time 0 -> 1, others as they were
    assert [f[:3] + f[4:] for f in after] == [f[:3] + f[4:] for f in before]


def test_accasim_runs_the_log_on_one_node_of_all_its_processors() -> None:
    system = bench_logs.accasim_system(8192)
    assert system["groups"] == {"g0": {"core": 8192}} and system["resources"] == {"g0": 1}
    assert system["equivalence"] == {"processor": {"core": 1}}
    assert system["start_time"] == bench_logs.ACCASIM_EPOCH
