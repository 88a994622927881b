"""Real workload logs as they are (issue 36; docs/workloads.md, "Real logs"): a ``.swf.gz``
read directly, the platform from its header, every oddity handled by a rule and counted.

The four logs of the Parallel Workloads Archive are not shipped: the tests that use them read
``shared/traces/`` beside the checkout (``../shared/traces``) and are skipped, saying so, when
it is not there. They take the first jobs of each log (a head slice, gzipped again) to stay
fast; the rules are also checked on small logs written here.
"""

from __future__ import annotations

import csv
import gzip
import json
import math
from pathlib import Path

import pytest

from malleable.cli import main
from malleable.workloads.swf import read_trace
from malleable.workloads.swf_log import LogHeader

ROOT = Path(__file__).resolve().parents[2]
TRACES = ROOT.parent / "shared" / "traces"
LOGS = {  # name: (MaxNodes, processors a node) as the header says
    "DAS2-fs1-2003-1": (32, 2),
    "LLNL-Atlas-2006-2.1-cln": (1152, 8),
    "RICC-2010-2": (1024, 8),
    "theta_2022": (4360, 1),
}
HEAD = 3000  # jobs of each log in the head slice

needs_traces = pytest.mark.skipif(not TRACES.is_dir(),
                                  reason=f"the real logs are not at {TRACES} (not shipped)")


def _head(name: str, tmp_path: Path, jobs: int = HEAD) -> tuple[Path, list[str], list[str]]:
    """The header and first ``jobs`` data lines of a log, gzipped into ``tmp_path``."""
    header, data = [], []
    with gzip.open(TRACES / f"{name}.swf.gz", "rt", encoding="ascii") as handle:
        for line in handle:
            if line.lstrip().startswith(";"):
                header.append(line)
            elif line.strip():
                data.append(line)
                if len(data) == jobs:
                    break
    path = tmp_path / f"{name}-head.swf.gz"
    with gzip.open(path, "wt", encoding="ascii") as out:
        out.writelines(header + data)
    return path, header, data


def _simulate(tmp_path: Path, capsys: pytest.CaptureFixture[str], *argv: str
              ) -> tuple[dict, dict[str, dict[str, str]]]:
    out = tmp_path / "out"
    assert main(["simulate", "--policy", "fcfs", "--json", "--out", str(out), *argv]) == 0
    summary = json.loads(capsys.readouterr().out)
    with (out / "jobs.csv").open(newline="") as handle:
        return summary, {row["job"]: row for row in csv.DictReader(handle)}


def _expected_counts(data: list[str], per_node: int) -> dict[str, int]:
    """The counts, made here from the raw lines (not by the reader)."""
    names = {1: "status_completed", 0: "status_failed", 5: "status_cancelled",
             -1: "status_unknown"}
    counts = dict.fromkeys(["status_completed", "status_failed", "status_cancelled",
                            "status_unknown", "runtime_zero", "walltime_missing",
                            "walltime_below_runtime", "rounded_up_to_nodes",
                            "size_from_allocated"], 0)
    skipped = kept = 0
    for line in data:
        f = [int(x) for x in line.split()]
        size = f[7] if f[7] > 0 else f[4]
        if size <= 0 or f[3] < 0:
            skipped += 1
            continue
        kept += 1
        counts[names.get(f[10], "status_other")] = counts.get(names.get(f[10], "x"), 0) + 1
        counts["runtime_zero"] += f[3] == 0
        counts["walltime_missing"] += f[8] <= 0
        counts["walltime_below_runtime"] += 0 < f[8] < f[3]
        counts["rounded_up_to_nodes"] += size % per_node != 0
        counts["size_from_allocated"] += f[7] <= 0
    return {**counts, "skipped": skipped, "jobs": kept}


@needs_traces
@pytest.mark.parametrize("name", list(LOGS))
def test_a_log_runs_as_it_is_on_the_machine_its_header_describes(
        name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Most of RICC's jobs are not whole nodes of 8 (its scheduler shared nodes): it runs on
    MaxProcs one-processor nodes, and ``trace`` says so; the others on MaxNodes nodes."""
    path, _, data = _head(name, tmp_path)
    nodes, per_node = LOGS[name]
    not_whole = _expected_counts(data, per_node)["rounded_up_to_nodes"]
    shared = not_whole * 2 > len(data)  # counted here from the raw lines
    assert shared == (name == "RICC-2010-2")
    if shared:
        nodes, per_node = nodes * per_node, 1
    summary, rows = _simulate(tmp_path, capsys, "--workload", str(path))
    assert summary["platform"] == str(nodes)
    trace = summary["trace"]
    assert trace["platform_from_header"] == nodes and trace["procs_per_node"] == per_node
    assert trace.get("processors_as_nodes", 0) == int(shared)
    assert trace.get("not_whole_nodes") == (not_whole if shared else None)
    expected = _expected_counts(data, per_node)
    assert {key: trace[key] for key in expected} == expected
    assert summary["jobs"] == summary["completed"] == expected["jobs"] == len(rows)
    by_id = {line.split()[0]: [int(x) for x in line.split()] for line in data}
    for job, row in rows.items():  # sizes in whole nodes, rounded up
        f = by_id[job]
        assert int(row["initial_size"]) == math.ceil((f[7] if f[7] > 0 else f[4]) / per_node)


@needs_traces
def test_the_epoch_times_of_theta_are_shifted_to_its_first_job(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path, header, data = _head("theta_2022", tmp_path, 500)
    assert LogHeader.of(header).unix_start == 0
    summary, rows = _simulate(tmp_path, capsys, "--workload", str(path))
    first = int(data[0].split()[1])
    assert summary["trace"]["submit_shift_s"] == first > 1_600_000_000
    for line in data:
        f = line.split()
        assert float(rows[f[0]]["submit"]) == int(f[1]) - first


@needs_traces
def test_gzip_and_plain_give_the_same_run_and_the_platform_overrides(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path, header, data = _head("DAS2-fs1-2003-1", tmp_path, 1000)
    plain = tmp_path / "das2.swf"
    plain.write_text("".join(header + data), encoding="ascii")
    gz_summary, gz_rows = _simulate(tmp_path / "a", capsys, "--workload", str(path))
    summary, rows = _simulate(tmp_path / "b", capsys, "--workload", str(plain))
    assert rows == gz_rows
    assert {k: v for k, v in summary.items() if k != "workload"} == \
        {k: v for k, v in gz_summary.items() if k != "workload"}
    # --platform N: processors as nodes; --procs-per-node says otherwise
    summary, rows = _simulate(tmp_path / "c", capsys, "--workload", str(path),
                              "--platform", "64")
    assert summary["trace"]["procs_per_node"] == 1 and "platform_from_header" not in \
        summary["trace"]
    sizes = {line.split()[0]: int(line.split()[7]) for line in data}
    assert all(int(row["initial_size"]) == sizes[job] for job, row in rows.items())
    summary, _ = _simulate(tmp_path / "d", capsys, "--workload", str(path), "--platform",
                           "32", "--procs-per-node", "4")
    assert summary["trace"]["procs_per_node"] == 4


def _write(path: Path, header: list[str], lines: list[list[int]]) -> Path:
    text = "\n".join(header + [" ".join(map(str, f)) for f in lines]) + "\n"
    if path.suffix == ".gz":
        with gzip.open(path, "wt", encoding="utf-8") as out:
            out.write(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def _line(job: int, submit: int, runtime: int, procs: int, wall: int, status: int,
          allocated: int = -1) -> list[int]:
    return [job, submit, -1, runtime, allocated, -1, -1, procs, wall, -1, status, 1, 1,
            -1, 1, -1, -1, -1]


@pytest.mark.parametrize("suffix", [".swf", ".swf.gz"])
def test_every_oddity_has_its_rule_and_its_count(
        suffix: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A small log with one of each: read by the vectorized and by the line reader (a
    byte outside ASCII in a comment sends the second file line by line)."""
    header = ["; UnixStartTime: 0", "; MaxNodes: 4", "; MaxProcs: 8"]
    base = 1_700_000_000
    lines = [_line(1, base, 100, 8, 200, 1),           # completed, whole nodes
             _line(2, base + 1, 0, 3, 60, 5),          # cancelled before it ran: 0 s
             _line(3, base + 2, 50, 2, -1, 0),         # failed, no wall time
             _line(4, base + 3, 90, 1, 30, 1),         # ran past its request; 1 proc
             _line(5, base + 4, -1, 4, 60, 5),         # run time unknown: skipped
             _line(6, base + 5, 10, -1, 60, 2, 5),     # size from field 5 (5 procs)
             _line(7, base + 6, 10, 2, 60, 9)]         # a status the archive has not
    for note in ([], ["; Note: Zürich"]):
        path = _write(tmp_path / f"log{suffix}", header + note, lines)
        summary, rows = _simulate(tmp_path, capsys, "--workload", str(path))
        trace = summary["trace"]
        assert summary["platform"] == "4" and trace["procs_per_node"] == 2
        assert {k: trace[k] for k in ("jobs", "skipped", "status_completed", "status_failed",
                                      "status_cancelled", "status_partial", "status_other",
                                      "runtime_zero", "walltime_missing",
                                      "walltime_below_runtime", "rounded_up_to_nodes",
                                      "size_from_allocated", "submit_shift_s")} == {
            "jobs": 6, "skipped": 1, "status_completed": 2, "status_failed": 1,
            "status_cancelled": 1, "status_partial": 1, "status_other": 1,
            "runtime_zero": 1, "walltime_missing": 1, "walltime_below_runtime": 1,
            "rounded_up_to_nodes": 3, "size_from_allocated": 1, "submit_shift_s": base}
        assert sorted(rows) == ["1", "2", "3", "4", "6", "7"]
        assert [int(rows[j]["initial_size"]) for j in ("1", "2", "3", "4", "6", "7")] == \
            [4, 2, 1, 1, 3, 1]
        assert float(rows["2"]["start"]) == float(rows["2"]["end"]) == 100.0  # job 1 ends
        assert float(rows["4"]["execution_s"]) == 90.0  # its logged run time, not 30
        assert float(rows["1"]["submit"]) == 0.0


def test_absolute_times_without_unix_start_0_are_kept_and_the_header_optional(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(tmp_path / "log.swf", ["; UnixStartTime: 1700000000"],
                  [_line(1, 1_700_000_000, 10, 2, 20, 1)])
    summary, rows = _simulate(tmp_path, capsys, "--workload", str(path), "--platform", "4")
    assert summary["trace"]["submit_shift_s"] == 0.0
    assert float(rows["1"]["submit"]) == 1_700_000_000
    plain = _write(tmp_path / "bare.swf", [], [_line(1, 5, 10, 2, 20, 1)])
    assert read_trace(plain).header == []
    summary, _ = _simulate(tmp_path / "bare", capsys, "--workload", str(plain))
    assert "platform" not in summary  # no header: the default das3


def test_a_damaged_gzip_log_is_refused_with_exit_2(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(tmp_path / "log.swf.gz", ["; MaxNodes: 4"],
                  [_line(n, n, 10, 2, 20, 1) for n in range(1, 2000)])
    path.write_bytes(path.read_bytes()[:-40])  # cut short
    assert main(["simulate", "--workload", str(path), "--json"]) == 2
    assert "gzip" in capsys.readouterr().err


@needs_traces
def test_procs_per_node_keeps_whole_nodes_on_a_log_of_shared_nodes(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path, _, data = _head("RICC-2010-2", tmp_path)
    summary, _ = _simulate(tmp_path, capsys, "--workload", str(path), "--procs-per-node", "8")
    assert summary["platform"] == "1024" and "processors_as_nodes" not in summary["trace"]
    not_whole = _expected_counts(data, 8)["rounded_up_to_nodes"]
    assert summary["trace"]["rounded_up_to_nodes"] == not_whole > len(data) / 2


@pytest.mark.parametrize(("sizes", "platform", "per_node"), [
    ([8, 3, 5, 16, 4], "64", 1),    # 3 of 5 not whole nodes of 8: processors as nodes
    ([8, 3, 5, 16, 24], "8", 8),    # 2 of 5: whole nodes, rounded up
    ([8, 3, 5, 16], "8", 8),        # 2 of 4: half is not most
])
def test_a_log_most_of_whose_jobs_are_not_whole_nodes_runs_on_processors(
        sizes: list[int], platform: str, per_node: int, tmp_path: Path,
        capsys: pytest.CaptureFixture[str]) -> None:
    header = ["; MaxNodes: 8", "; MaxProcs: 64"]
    path = _write(tmp_path / "log.swf", header,
                  [_line(n, n, 10, size, 20, 1) for n, size in enumerate(sizes, 1)])
    out = tmp_path / "out"
    assert main(["simulate", "--policy", "fcfs", "--workload", str(path), "--out", str(out),
                 "--no-figures"]) == 0
    table = capsys.readouterr()
    summary = json.loads((out / "summary.json").read_text())
    trace = summary["trace"]
    assert summary["platform"] == platform and trace["platform_from_header"] == int(platform)
    assert trace["procs_per_node"] == per_node
    not_whole = sum(size % 8 != 0 for size in sizes)
    if per_node == 1:  # said in trace, in the table's trace line and once on stderr
        assert trace["processors_as_nodes"] == 1 and trace["not_whole_nodes"] == not_whole
        assert trace["rounded_up_to_nodes"] == 0
        assert "processors_as_nodes 1" in table.out and "--procs-per-node 8" in table.err
    else:
        assert "processors_as_nodes" not in trace and "--procs-per-node" not in table.err
        assert trace["rounded_up_to_nodes"] == not_whole
    with (out / "jobs.csv").open(newline="") as handle:
        got = [int(row["initial_size"]) for row in csv.DictReader(handle)]
    assert got == [math.ceil(size / per_node) for size in sizes]


def test_the_header_gives_the_machine_with_processors_as_the_unit_when_nodes_were_shared(
        ) -> None:
    ricc = LogHeader.of(["; MaxNodes: 1024", "; MaxProcs: 8192"])
    assert ricc.machine(355_230, 447_794) == (8192, 1)
    assert ricc.machine(223_897, 447_794) == (1024, 8)  # exactly half: whole nodes
    assert ricc.machine(223_898, 447_794) == (8192, 1)
    assert LogHeader.of(["; MaxProcs: 64"]).machine(10, 11) == (64, 1)
    assert LogHeader.of(["; MaxNodes: 3", "; MaxProcs: 64"]).machine(10, 11) == (64, 1)
    assert LogHeader.of([]).machine(1, 1) is None


def test_procs_per_node_needs_a_file(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", "--workload", "wm", "--procs-per-node", "2"]) == 2
    assert "--procs-per-node" in capsys.readouterr().err


def test_a_long_run_on_the_pure_build_says_how_to_get_the_compiled_one(
        tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    from malleable.commands import simulate

    path = _write(tmp_path / "log.swf", ["; MaxNodes: 4"],
                  [_line(n, n, 1, 1, 20, 1) for n in range(1, 31)])
    monkeypatch.setattr(simulate, "PURE_NOTE_JOBS", 30)
    monkeypatch.setattr(simulate, "_pure", lambda: True)
    assert main(["simulate", "--workload", str(path), "--json"]) == 0
    assert "pip install ." in capsys.readouterr().err
    monkeypatch.setattr(simulate, "_pure", lambda: False)  # compiled: nothing said
    assert main(["simulate", "--workload", str(path), "--json"]) == 0
    assert "pip install" not in capsys.readouterr().err
    monkeypatch.setattr(simulate, "_pure", lambda: True)
    monkeypatch.setattr(simulate, "PURE_NOTE_JOBS", 31)  # shorter runs: nothing said
    assert main(["simulate", "--workload", str(path), "--json"]) == 0
    assert "pip install" not in capsys.readouterr().err
