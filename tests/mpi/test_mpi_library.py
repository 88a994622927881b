"""The library under real mpirun: every layout any-to-any, inhibitors, the DMR source, and
the runner's file channel driven from the test as a runner would."""

from __future__ import annotations

import json
import socket
import subprocess
import time
from pathlib import Path

import pytest

from malleable.mpi.channel import offer_to_json, read_json, write_json
from malleable.mpi.session import EXIT_SPAWN_HUNG
from malleable.mpi.sources import Offer
from tests.fakes.mpirun import (
    PROGRAMS,
    Hung,
    finish,
    needs_mpi,
    result,
    run,
    sizes,
    start,
    starts,
    stop,
)

pytestmark = needs_mpi
CHECK = PROGRAMS / "check_app.py"


def test_every_layout_survives_any_to_any_resizes(tmp_path: Path) -> None:
    out = run(3, CHECK, "--schedule", "0:3,3:5,6:2,9:1,12:4", "--iterations", "15",
              "--result", "r.json", cwd=tmp_path)
    res = result(tmp_path / "r.json")
    assert sizes(res) == [3, 5, 2, 1, 4], out
    assert starts(res) == [0, 3, 6, 9, 12]
    assert res["checksum"] == 0.0  # no element out of place at any iteration
    assert all(p["reconfig_seconds"] > 0 for p in res["phases"][1:])


def test_offered_hosts_place_ranks_through_a_hostfile(tmp_path: Path) -> None:
    host = socket.gethostname()  # mpirun knows this host by this name
    run(2, CHECK, "--schedule", "0:2,2:3,4:1,6:4", "--hosts", f"{host}:4", "--iterations", "8",
        "--result", "r.json", cwd=tmp_path)
    res = result(tmp_path / "r.json")
    assert sizes(res) == [2, 3, 1, 4]
    assert res["checksum"] == 0.0


def test_every_k_iterations_inhibitor_delays_the_resize_to_the_next_check(tmp_path: Path) -> None:
    run(1, CHECK, "--schedule", "0:1,5:2", "--every", "4", "--iterations", "10",
        "--result", "r.json", cwd=tmp_path)
    res = result(tmp_path / "r.json")
    assert sizes(res) == [1, 2]
    assert starts(res) == [0, 8]  # checks at 0, 4, 8: the step at 5 waits for 8


def test_dmr_source_expands_onto_free_resources_up_to_the_maximum(tmp_path: Path) -> None:
    (tmp_path / "res.json").write_text(json.dumps({"available": 5, "pending": []}))
    run(1, CHECK, "--dmr", "res.json", "--max", "3", "--every", "3", "--iterations", "6",
        "--result", "r.json", cwd=tmp_path)
    res = result(tmp_path / "r.json")
    assert sizes(res) == [1, 3] and starts(res) == [0, 0]
    assert res["checksum"] == 0.0


def _wait_for(path: Path, deadline: float) -> dict[str, object]:
    while time.monotonic() < deadline:
        data = read_json(path)
        if data is not None:
            return data
        time.sleep(0.1)
    raise AssertionError(f"{path.name} did not appear in time")


def test_file_channel_offers_answers_and_completions(tmp_path: Path) -> None:
    channel = tmp_path / "ch"
    channel.mkdir()
    proc = start(1, CHECK, "--channel", str(channel), "--max", "4", "--delay", "0.05",
                 "--result", "r.json", cwd=tmp_path)
    try:
        deadline = time.monotonic() + 150
        write_json(channel / "offer.json", offer_to_json(Offer(3, seq=1)))
        assert _wait_for(channel / "answer-1.json", deadline)["accepted"] == 3
        done = _wait_for(channel / "done-1.json", deadline)
        assert done["size"] == 3 and done["error"] == ""
        write_json(channel / "offer.json", offer_to_json(Offer(9, seq=2)))  # above max 4
        assert _wait_for(channel / "answer-2.json", deadline)["accepted"] == 4
        assert _wait_for(channel / "done-2.json", deadline)["size"] == 4
        write_json(channel / "offer.json", offer_to_json(Offer(2, seq=3, mandatory=True)))
        assert _wait_for(channel / "done-3.json", deadline)["size"] == 2
        assert _wait_for(channel / "request-1.json", deadline)["target"] == 3
        (channel / "stop").touch()
        out = finish(proc)
    finally:
        stop(proc)
    res = result(tmp_path / "r.json")
    assert sizes(res) == [1, 3, 4, 2], out
    assert res["checksum"] == 0.0
    events = [json.loads(line) for line in (channel / "events.jsonl").read_text().splitlines()]
    assert [(e["event"], e["size"]) for e in events] == [
        ("start", 1), ("resize", 3), ("resize", 4), ("resize", 2), ("finish", 2)]


def test_a_hung_run_is_ended_with_every_ranks_stacks_in_the_failure(tmp_path: Path) -> None:
    """The timeout path of tests/fakes/mpirun.py: a run that cannot finish in time is asked
    for its stacks (SIGUSR1, forwarded by mpirun) before it is ended, so a hang in CI says
    where it hung."""
    (tmp_path / "ch").mkdir()
    proc = start(2, CHECK, "--channel", "ch", "--delay", "0.5", cwd=tmp_path)  # runs until stopped
    try:  # iteration 1: both ranks have passed an allreduce, so both registered the handler
        _wait_for_iteration(tmp_path / "ch" / "progress.json", 1, time.monotonic() + 60)
    except BaseException:
        stop(proc)
        raise
    try:
        finish(proc, timeout=1)
    except pytest.fail.Exception as exc:
        text = str(exc)
    else:
        raise AssertionError("a run that waits for a stop file finished")
    assert proc.poll() is not None  # ended, with everything it started
    assert text.count("check_app.py") >= 2, text  # both ranks' stacks
    assert "in main" in text, text


def _wait_for_iteration(path: Path, iteration: int, deadline: float) -> None:
    while time.monotonic() < deadline:
        if int((read_json(path) or {}).get("iteration", -1)) >= iteration:
            return
        time.sleep(0.1)
    raise AssertionError(f"{path} did not reach iteration {iteration}")


def test_a_run_hung_in_spawn_runs_once_more_with_a_warning_and_other_hangs_fail(
        tmp_path: Path) -> None:
    """Open MPI 4.1's spawn hangs now and then (openpmix#2735, tests/fakes/mpirun.py): such a
    run, told by its stacks, is run once more; a hang anywhere else is a failure."""
    program = PROGRAMS / "hangs_once.py"
    with pytest.warns(UserWarning, match=r"(?s)spawn hung.*in _spawn"):
        run(2, program, cwd=tmp_path, timeout=5, hangs_after="hung-once")
    assert (tmp_path / "hung-once").exists()  # the first run did hang
    other = tmp_path / "other"
    other.mkdir()
    with pytest.raises(Hung, match="in elsewhere"):
        run(2, program, "--elsewhere", cwd=other, timeout=5, hangs_after="hung-once")


def test_a_spawn_that_hangs_is_reported_failed_and_aborts_the_application(
        tmp_path: Path) -> None:
    """The spawn watchdog: a grow whose new processes never start MPI (as in openpmix#2735)
    ends the application within the limit, with exit code 75 and one line saying why, after
    rank 0 told the source the resize failed; the stuck children do not outlive it."""
    marker = f"stuck-child-{tmp_path.name}"
    t0 = time.monotonic()
    proc = start(1, PROGRAMS / "spawn_hangs.py", marker, cwd=tmp_path,
                 env={"MALLEABLE_SPAWN_TIMEOUT": "2"})
    out = finish(proc, timeout=60, ok=(EXIT_SPAWN_HUNG,))
    elapsed = time.monotonic() - t0
    assert proc.returncode == EXIT_SPAWN_HUNG, out
    assert "spawning 2 processes hung for 2 s at iteration 1" in out, out
    assert "the run ended normally" not in out
    assert elapsed < 30, elapsed  # the limit (2 s) and the abort, not mpirun's own timeouts
    reports = [json.loads(line) for line in (tmp_path / "reports.jsonl").read_text().splitlines()]
    assert reports == [{"seq": reports[0]["seq"], "size": 1, "iteration": 1, "seconds": 0.0,
                        "error": "spawn hung for 2 s"}]
    deadline = time.monotonic() + 10
    while subprocess.run(["pgrep", "-f", marker], capture_output=True).returncode == 0:
        assert time.monotonic() < deadline, "the stuck children outlived the aborted run"
        time.sleep(0.2)


def test_a_run_aborted_by_the_spawn_watchdog_runs_once_more_then_fails(tmp_path: Path) -> None:
    """The tests' harness treats the watchdog's abort like a hang told by the stacks."""
    marker = f"stuck-child-{tmp_path.name}"
    with pytest.warns(UserWarning, match=r"(?s)spawn hung.*spawn watchdog aborted"), \
            pytest.raises(Hung, match="spawning 2 processes hung for 2 s"):
        run(1, PROGRAMS / "spawn_hangs.py", marker, cwd=tmp_path, timeout=60,
            env={"MALLEABLE_SPAWN_TIMEOUT": "2"})
    assert len((tmp_path / "reports.jsonl").read_text().splitlines()) == 2  # two runs
