"""Resize sources and the runner's file channel (pure, no MPI)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from malleable.model import SizeRule
from malleable.mpi import demo
from malleable.mpi.channel import FileChannel, offer_from_json, offer_to_json, write_json
from malleable.mpi.params import Params
from malleable.mpi.session import hostfile_text, rank_hosts
from malleable.mpi.sources import DmrSource, Offer, Point, Report, Resources, Scripted

P = Params(1, 8, 2)


def test_scripted_phases_split_iterations_equally() -> None:
    assert Scripted.phases([2, 4, 2], 30).steps == {0: 2, 10: 4, 20: 2}
    assert Scripted.parse("2,4,2", 30).steps == {0: 2, 10: 4, 20: 2}
    assert Scripted.parse("0:2, 7:3", 30).steps == {0: 2, 7: 3}
    with pytest.raises(ValueError, match="bad schedule"):
        Scripted.parse("2,x", 30)
    with pytest.raises(ValueError, match="cannot hold"):
        Scripted.phases([1, 2, 3], 2)


def test_scripted_offers_each_step_once_even_when_a_check_comes_late() -> None:
    s = Scripted({0: 2, 10: 4, 20: 2})
    assert s.poll(Point(0, 2, P)) is None  # already at 2
    assert s.poll(Point(9, 2, P)) is None
    assert s.poll(Point(12, 2, P)) == Offer(4, seq=10)  # the first check after 10
    assert s.poll(Point(13, 4, P)) is None
    s2 = Scripted({0: 2, 10: 4, 20: 2})
    s2.restore(s.snapshot())  # handed to the new process set
    assert s2.poll(Point(14, 4, P)) is None
    assert s2.poll(Point(25, 4, P)) == Offer(2, seq=20)


def test_dmr_source_applies_algorithm_2_to_the_probe() -> None:
    seen = [Resources(3), Resources(0, (3,)), Resources(0)]
    source = DmrSource(lambda: seen.pop(0))
    params = Params(1, 8, 2)
    assert source.poll(Point(0, 2, params)) == Offer(5, seq=1)  # 3 free: expand
    assert source.poll(Point(1, 5, params)) == Offer(2, seq=2)  # a 3-node job waits: shrink
    assert source.poll(Point(2, 2, params)) is None
    assert source.snapshot() == {"checks": 3}


def test_hostfile_gives_back_the_slots_a_power_of_two_program_declines() -> None:
    offer = Offer(5, ("n1", "n2", "n3", "n4", "n5"))
    assert hostfile_text(offer, 4) == "n1\nn2\nn3\nn4\n"
    assert hostfile_text(Offer(4, ("c0:2", "c1:2")), 3) == "c0\nc0\nc1\n"
    assert hostfile_text(Offer(3), 3) == ""
    assert rank_hosts(["a:3", "b"]) == ["a", "a", "a", "b"]
    with pytest.raises(ValueError, match="host:count"):
        rank_hosts(["a:x"])
    with pytest.raises(ValueError, match="host:count"):
        rank_hosts([":2"])
    with pytest.raises(ValueError, match="2 slots for 3"):
        hostfile_text(Offer(3, ("a:2",)), 3)


def test_file_channel_round_trip(tmp_path: Path) -> None:
    channel = FileChannel(tmp_path)
    point = Point(7, 2, P)
    assert channel.poll(point) is None
    assert json.loads((tmp_path / "progress.json").read_text())["iteration"] == 7
    offer = Offer(4, ("a", "b", "c", "d"), seq=1)
    write_json(tmp_path / "offer.json", offer_to_json(offer))
    assert channel.poll(point) == offer
    channel.answered(offer, point, 4)
    assert channel.poll(point) is None  # handled
    assert json.loads((tmp_path / "answer-1.json").read_text()) == {
        "seq": 1, "accepted": 4, "size": 2, "iteration": 7}
    channel.completed(Report(1, 4, 7, 0.5))
    assert json.loads((tmp_path / "done-1.json").read_text())["seconds"] == 0.5
    assert channel.request(8, 9) == 1
    assert json.loads((tmp_path / "request-1.json").read_text())["target"] == 8
    channel.record({"event": "start", "iteration": 0, "size": 2})
    line = json.loads((tmp_path / "events.jsonl").read_text())
    assert line["event"] == "start" and "time" in line
    fresh = FileChannel(tmp_path)
    fresh.restore(channel.snapshot())
    assert fresh.poll(point) is None and fresh.request(2, 10) == 2


def test_malformed_offers_are_refused_with_the_field(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="malformed offer"):
        offer_from_json({"seq": 1})
    with pytest.raises(ValueError, match="target >= 1"):
        offer_from_json({"seq": 1, "target": 0})
    (tmp_path / "offer.json").write_text('{"seq": "x", "target": 2}')
    assert FileChannel(tmp_path).poll(Point(0, 1, P)) is None  # logged and ignored


def test_demo_options_build_the_named_source(tmp_path: Path) -> None:
    parser = demo.parser("x", iterations=30, size=8)
    scripted = demo.source(parser.parse_args(["--schedule", "2,4", "--hosts", "a:2,b"]))
    assert isinstance(scripted, Scripted) and scripted.hosts == ("a:2", "b")
    assert isinstance(demo.source(parser.parse_args(["--channel", str(tmp_path)])), FileChannel)
    probe_file = tmp_path / "res.json"
    probe_file.write_text('{"available": 2, "pending": [5]}')
    dmr = demo.source(parser.parse_args(["--dmr", str(probe_file)]))
    assert isinstance(dmr, DmrSource) and dmr.probe() == Resources(2, (5,))
    fixed = demo.source(parser.parse_args([]))
    assert isinstance(fixed, Scripted) and fixed.poll(Point(5, 3, P)) is None
    args = parser.parse_args(["--min", "2", "--max", "8", "--every", "3", "--period", "0.5"])
    assert demo.params(args, SizeRule.POW2) == Params(2, 8, None, SizeRule.POW2)
    assert demo.inhibitors(args).every == 3


def test_demo_request_option_names_iterations_and_sizes() -> None:
    parser = demo.parser("x", iterations=30, size=8)
    assert parser.parse_args([]).request == {}
    assert parser.parse_args(["--request", "20:4, 60:2"]).request == {20: 4, 60: 2}
    assert demo.parse_requests("0:3") == {0: 3}
    for bad in ("20", "a:4", "20:0", "-1:2"):
        with pytest.raises(argparse.ArgumentTypeError, match="bad request"):
            demo.parse_requests(bad)


def test_demo_delay_file_sets_each_iterations_sleep_while_it_holds_a_number(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    steps: list[int] = []
    slept: list[float] = []
    monkeypatch.setattr(demo.time, "sleep", slept.append)

    def step(comm: object, data: object, iteration: int) -> None:
        steps.append(iteration)

    assert demo.slowed(step, 0.0) is step  # nothing to sleep: the step itself
    demo.slowed(step, 0.5)(None, None, 0)
    assert slept == [0.5]
    path = tmp_path / "delay"
    args = demo.parser("x", iterations=30, size=8).parse_args(["--delay-file", str(path)])
    assert args.delay_file == path and args.delay == 0.0
    slow = demo.slowed(step, 0.5, path)
    slow(None, None, 1)  # no file yet: --delay
    for text in ("0.25\n", "0", "x", "-1", "inf", "nan", "2"):
        path.write_text(text)
        slow(None, None, 2)
    assert slept == [0.5, 0.5, 0.25, 0.5, 0.5, 0.5, 0.5, 2.0]  # "0" sleeps not at all
    assert steps == [0, 1, 2, 2, 2, 2, 2, 2, 2]
    path.unlink()
    demo.slowed(step, 0.0, path)(None, None, 3)  # --delay 0 and no file: no sleep
    assert len(slept) == 8 and steps[-1] == 3
