"""``malleable manager run`` on the real testbed: a 20-job KOALA workload, time-scaled,
on 2 sites, with EGS/PRA and FPSMA/PWA (the latter stopped midway and resumed).

EGS/PRA runs W'm (a job every 30 s), not Wm (every 120 s): the same 20 jobs (the seed
draws the same mix) on saturated nodes, so jobs also wait; about 110 real seconds instead of
150, with 7 grows (8 in the simulator; docs/notes/ci10-budget.md). FPSMA/PWA keeps Wm: on
W'm it grew 3 times and shrank once, too few for its checks to be more than luck.

Checks: every job completes; grows (and with PWA shrinks) really happen on Slurm; the
records have the simulator's format; each job did exactly its work given the sizes it
ran at (so a grown job really ended sooner), within the resolution of the timestamps.
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest

from malleable.apps import standard_catalog
from malleable.cli import main
from malleable.metrics.summary import RECORD_COLUMNS
from malleable.store import Store, rebuild_records
from malleable.testbed import Testbed
from tests.fakes.waits import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(1200)]

SCALE = 0.05
TICK = 0.5  # the payload's default size check interval (real seconds)
LAUNCH = 1.5  # Slurm's batch launch plus the payload's start-up, real seconds, at most
SUMMARY_KEYS = {"jobs", "completed", "makespan_s", "utilization", "mean_wait_s",
                "mean_execution_s", "mean_response_s", "mean_avg_size", "mean_max_size",
                "grow_ops", "shrink_ops"}


@pytest.fixture(scope="module")
def config_file(small_testbed: Testbed, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("manager") / "clusters.toml"
    path.write_text(small_testbed.config_toml())
    return path


def _busy(tb: Testbed) -> int:
    """Jobs holding or waiting for nodes on either site."""
    argv = ["squeue", "--noheader", "--format=%i", "--states=PENDING,RUNNING,CONFIGURING"]
    return sum(len(tb.exec(site, argv, check=True).stdout.split()) for site in ("vu", "uva"))


@pytest.fixture
def idle_testbed(small_testbed: Testbed) -> Iterator[Testbed]:
    """Start from an empty queue, and leave none behind (cancel the user's jobs, wait)."""
    wait_for(lambda: _busy(small_testbed) == 0, 60, "an empty queue before the run")
    yield small_testbed
    for site in ("vu", "uva"):
        small_testbed.exec(site, ["scancel", "--user=malleable"])
    wait_for(lambda: _busy(small_testbed) == 0, 60, "an empty queue after the run")


def _args(config: Path, out: Path, approach: str, policy: str, workload: str) -> list[str]:
    return ["manager", "run", "--config", str(config), "--approach", approach, "--policy",
            policy, "--workload", workload, "--jobs", "20", "--time-scale", str(SCALE),
            "--poll", "0.5", "--out", str(out), "--compare-sim", "--json"]


def _summary(out: Path) -> dict[str, object]:
    return dict(json.loads((out / "summary.json").read_text()))


def _check_records(out: Path) -> None:
    with (out / "jobs.csv").open() as f:
        reader = csv.DictReader(f)
        rows = list(reader)
        assert tuple(reader.fieldnames or ()) == RECORD_COLUMNS
    with (out / "simulated" / "jobs.csv").open() as f:
        assert tuple(csv.DictReader(f).fieldnames or ()) == RECORD_COLUMNS
    assert len(rows) == 20 and {r["state"] for r in rows} == {"completed"}
    assert all(float(r["wait_s"]) >= 0 and float(r["execution_s"]) > 0 for r in rows)


def _sacct_times(tb: Testbed, run_id: str) -> dict[str, dict[str, float]]:
    """Per managed job of run ``run_id`` (by its Slurm job name), Slurm's accounting times in
    epoch seconds: ``start``/``end`` of the job and of its ``batch`` step (the payload)."""
    found: dict[str, dict[str, float]] = {}
    names: dict[str, str] = {}
    for site in ("vu", "uva"):
        out = tb.exec(site, ["sacct", "--allusers", "--noheader", "--parsable2",
                             "--starttime=now-2hours",
                             "--format=JobID,JobName,Start,End"], check=True).stdout
        for line in out.splitlines():
            parts = line.split("|")
            if len(parts) != 4:
                continue
            job_id, name, start, end = parts
            base, _, step = job_id.partition(".")
            key = f"{site}:{base}"
            if not step:
                names[key] = name
            elif step != "batch":
                continue
            try:
                times = {"start": datetime.fromisoformat(start).timestamp(),
                         "end": datetime.fromisoformat(end).timestamp()}
            except ValueError:
                continue
            found.setdefault(key, {}).update(
                {(f"batch_{k}" if step else k): v for k, v in times.items()})
    prefix = f"m.{run_id}."
    return {names[k][len(prefix):]: v for k, v in found.items()
            if names.get(k, "").startswith(prefix)}


def _check_work(out: Path, tb: Testbed) -> int:
    """Each job did one unit of work at the sizes it had, within the timing resolution, and
    a job that spent long enough grown ended sooner than it would have at its initial size."""
    store = Store.open(out / "state.sqlite")
    records, _ = rebuild_records(store)
    store.close()
    run_id = str(_summary(out)["run_id"])
    slurm = _sacct_times(tb, run_id)
    grown_sooner = 0
    rows = []
    for record in records:
        curve = standard_catalog().time_model(record.spec)
        assert record.end is not None
        spans = [(t, record.sizes[i + 1][0] if i + 1 < len(record.sizes) else record.end, n)
                 for i, (t, n) in enumerate(record.sizes)]
        work = sum((b - a) / curve(n) for a, b, n in spans)
        times = slurm.get(record.spec.id, {})
        launch = times.get("batch_start", math.nan) - times.get("start", math.nan)
        tail = times.get("end", math.nan) - times.get("batch_end", math.nan)
        # Slurm's own latency around the payload, as its accounting measured it: from the
        # job's start to its batch step's start, and from the step's end to the job's. Only
        # for a job never resized: a resize moves the job's accounted start (measured: up to
        # 25 s after its batch step's start, and its end up to 27 s after the step's).
        slurm_s = (max(0.0, launch) + max(0.0, tail)
                   if len(record.sizes) == 1 and math.isfinite(launch + tail) else 0.0)
        slack = (LAUNCH + 2.0 + TICK * len(record.sizes) + slurm_s) / SCALE  # model seconds
        bound = slack / min(curve(n) for _, _, n in spans)
        rows.append(f"  {record.spec.id:14} sizes {[n for _, n in record.sizes]!s:10} "
                    f"work {work:6.3f} (bound {bound:5.3f}) expected "
                    f"{curve(record.sizes[0][1]) * SCALE:6.2f} s measured "
                    f"{(record.end - record.sizes[0][0]) * SCALE:6.2f} s; Slurm launch "
                    f"{launch:3.0f} s tail {tail:3.0f} s")
        # 1e-9: the timestamps are whole seconds, so a job late by exactly the slack lands on
        # the bound, and float rounding put one 1e-16 past it (0.6666666666666667 > ...666)
        assert abs(work - 1.0) <= bound + 1e-9, (record.spec.id, record.sizes, work, bound,
                                                 "\n".join(rows))
        at_initial = curve(record.spec.initial_size)
        saving = sum((b - a) * (at_initial / curve(n) - 1.0) for a, b, n in spans)
        if saving > slack:
            assert record.execution < at_initial, (record.spec.id, record.sizes, saving)
            grown_sooner += 1
    print("\nper job (real seconds; Slurm launch: the job's start to its batch step's start, "
          "tail: the step's end to the job's end; whole seconds):")
    print("\n".join(rows))
    assert grown_sooner > 0
    return grown_sooner


def _report(out: Path, label: str, grown_sooner: int) -> None:
    real, sim = _summary(out), _summary(out)["simulated"]
    assert isinstance(sim, dict)
    print(f"\n{label}: {grown_sooner} job(s) grown long enough to end sooner; real vs simulated")
    for key in sorted(SUMMARY_KEYS):
        print(f"  {key:18} {real[key]!s:>22} {sim[key]!s:>22}")


def test_egs_pra_workload(idle_testbed: Testbed, config_file: Path, tmp_path: Path) -> None:
    out = tmp_path / "egs-pra"
    assert main(_args(config_file, out, "pra", "egs", "wm-prime")) == 0
    summary = _summary(out)
    assert set(summary) >= SUMMARY_KEYS
    assert summary["completed"] == 20 and summary["stopped"] == "done"
    assert isinstance(summary["grow_ops"], int) and summary["grow_ops"] > 0
    assert summary["shrink_ops"] == 0  # PRA never shrinks
    for where in (out, out / "simulated"):  # the run's figures, real and simulated (issue 40)
        for name in ("usage.png", "gantt.png"):
            assert (where / name).read_bytes()[:4] == b"\x89PNG", where / name
    resizes = summary["resizes"]
    assert isinstance(resizes, dict) and resizes.get("done", 0) >= summary["grow_ops"]
    _check_records(out)
    _report(out, "EGS/PRA", _check_work(out, idle_testbed))


def test_fpsma_pwa_workload_stopped_and_resumed(idle_testbed: Testbed, config_file: Path,
                                                tmp_path: Path) -> None:
    out = tmp_path / "fpsma-pwa"
    args = _args(config_file, out, "pwa", "fpsma", "wm")
    assert main([*args, "--deadline", "25"]) == 3  # stopped, state kept
    first = _summary(out)
    print(f"\nFPSMA/PWA stopped at 25 s with {first['jobs']} of 20 jobs submitted")
    assert first["stopped"] == "deadline"
    assert isinstance(first["jobs"], int) and 0 < first["jobs"] < 20
    assert main(args) == 0  # takes the run up again: same run id, all jobs done
    summary = _summary(out)
    assert summary["run_id"] == first["run_id"] and summary["completed"] == 20
    assert isinstance(summary["grow_ops"], int) and summary["grow_ops"] > 0
    assert isinstance(summary["shrink_ops"], int) and summary["shrink_ops"] > 0
    _check_records(out)
    _report(out, "FPSMA/PWA", _check_work(out, idle_testbed))


def test_the_workload_file_runs_in_the_simulator(tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """What ``manager run`` wrote as workload.swf is what ``malleable simulate`` reads."""
    out = tmp_path / "sim"
    from malleable.workloads.load import load_workload
    from malleable.workloads.swf import write_swf
    jobs = sorted(load_workload("wm", 1), key=lambda j: j.submit_time)[:20]
    write_swf(tmp_path / "workload.swf", jobs)
    assert main(["simulate", "--workload", str(tmp_path / "workload.swf"), "--approach", "pwa",
                 "--policy", "fpsma", "--out", str(out), "--json"]) == 0
    with (out / "jobs.csv").open() as f:
        assert tuple(csv.DictReader(f).fieldnames or ()) == RECORD_COLUMNS
    assert json.loads(capsys.readouterr().out)["completed"] == 20


def test_acds_from_the_configs_policy_table(idle_testbed: Testbed, config_file: Path,
                                            tmp_path: Path) -> None:
    """Any registered policy runs on real sites: AC-DS, named by a ``[policy]`` table, with
    ``--policy-option`` overriding one of the table's options."""
    config = tmp_path / "acds.toml"
    config.write_text('[policy]\nname = "acds"\n[policy.options]\nquantum = 600.0\n'
                      'levels = ["site"]\n' + config_file.read_text())
    out = tmp_path / "acds"
    assert main(["manager", "run", "--config", str(config), "--policy-option", "quantum=120",
                 "--workload", "wm", "--jobs", "10", "--time-scale", str(SCALE), "--poll",
                 "0.5", "--out", str(out), "--json"]) == 0
    summary = _summary(out)
    assert summary["policy"] == "acds" and summary["approach"] is None
    assert summary["policy_options"] == {"quantum": 120, "levels": ["site"]}
    assert summary["completed"] == 10 and summary["stopped"] == "done"
    assert isinstance(summary["grow_ops"], int) and summary["grow_ops"] > 0
    with (out / "jobs.csv").open() as f:
        assert {r["state"] for r in csv.DictReader(f)} == {"completed"}
    # the same state file with another policy is refused, naming both
    assert main(["manager", "run", "--config", str(config), "--policy", "egs", "--workload",
                 "wm", "--jobs", "10", "--time-scale", str(SCALE), "--out", str(out)]) == 2
