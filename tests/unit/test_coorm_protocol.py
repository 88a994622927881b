"""The CooRM message schema: round trips, validation, sizes."""

from __future__ import annotations

import json

import pytest

from malleable.coorm.protocol import (
    AVAILABILITY,
    Change,
    ChangeNotify,
    ClusterInfo,
    ClustersInfo,
    Done,
    Error,
    Filter,
    InterClusterInfo,
    KillNotify,
    Link,
    ListClustersInfo,
    ListInterClusterInfo,
    Message,
    ProtocolError,
    Request,
    StartNotify,
    Subscribe,
    Subscribed,
    cdr_size,
    decode,
    encode,
)

MESSAGES: list[Message] = [
    Subscribe(filter=Filter(min_hosts=4, clusters=("c1", "c2")), name="cem"),
    Subscribe(),
    ListClustersInfo(),
    ListInterClusterInfo(),
    Request(hosts={"c1": 3, "c2": 5}, duration=120.5),
    Done(),
    Subscribed(app="a7"),
    ChangeNotify(changes=(Change("c1", AVAILABILITY, ((0.0, 4), (10.5, 128))),
                          Change("c2", "clusterInfo"))),
    ClustersInfo(clusters=(ClusterInfo("c1", 128, speed=1.1),)),
    InterClusterInfo(links=(Link("c1", "c2", 0.01),)),
    StartNotify(rids={"c1": ("c1-h0000", "c1-h0001")}),
    StartNotify(rids={"vu": ("vu-h0000",)}, jobs={"vu": 17}),  # from a real-sites service
    KillNotify(reason="allocation time exceeded"),
    Error(message="bad"),
]


@pytest.mark.parametrize("msg", MESSAGES, ids=lambda m: m.TYPE)
def test_round_trip(msg: Message) -> None:
    line = encode(msg)
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    body = json.loads(line)
    assert body["v"] == 1 and body["type"] == msg.TYPE
    assert decode(line) == msg


def test_request_schema_is_stable() -> None:
    line = encode(Request(hosts={"c2": 5, "c1": 3, "c3": 0}, duration=60.0))
    assert line == b'{"v":1,"type":"request","hosts":{"c1":3,"c2":5},"duration":60.0}\n'


@pytest.mark.parametrize(("line", "problem"), [
    (b"not json", "not JSON"),
    (b"[1, 2]", "JSON object"),
    (b'{"v": 2, "type": "done"}', "version"),
    (b'{"v": 1, "type": "hello"}', "unknown message type"),
    (b'{"v": 1, "type": "request", "hosts": {"c1": -1}, "duration": 5}', "hosts"),
    (b'{"v": 1, "type": "request", "hosts": {"c1": 1}, "duration": 0}', "positive"),
    (b'{"v": 1, "type": "request", "hosts": [1], "duration": 5}', "object"),
    (b'{"v": 1, "type": "request", "hosts": {"c1": 1}}', "duration"),
    (b'{"v": 1, "type": "changeNotify", "changes": [{"cid": "c", "type": "x"}]}', "type"),
    (b'{"v": 1, "type": "changeNotify", "changes": [{"cid": "c", "type": "availability"}]}',
     "cap"),
    (b'{"v": 1, "type": "subscribe", "filter": {"min_hosts": true}}', "min_hosts"),
    (b'{"v": 1, "type": "startNotify", "rids": {}, "jobs": [3]}', "jobs"),
    (b'{"v": 1, "type": "startNotify", "rids": {}, "jobs": {"vu": -3}}', "job id"),
])
def test_bad_messages_name_the_problem(line: bytes, problem: str) -> None:
    with pytest.raises(ProtocolError, match=problem):
        decode(line)


def test_simulated_starts_carry_no_slurm_jobs_on_the_wire() -> None:
    assert encode(StartNotify(rids={"c1": ("c1-h0000",)})) == (
        b'{"v":1,"type":"startNotify","rids":{"c1":["c1-h0000"]}}\n')


def test_infinite_times_never_go_on_the_wire() -> None:
    with pytest.raises(ValueError):
        encode(Request(hosts={"c1": 1}, duration=float("inf")))
    with pytest.raises(ValueError):
        encode(ChangeNotify(changes=(Change("c1", AVAILABILITY, ((float("inf"), 1),)),)))


def test_cdr_sizes() -> None:
    # header 12 + type tag 4 + change count 4 + cid "c1" (4 + 4) + type enum 4
    # + step count 4 + 2 steps of 16
    cap = ChangeNotify(changes=(Change("c1", AVAILABILITY, ((0.0, 4), (1.0, 5))),))
    assert cdr_size(cap) == 12 + 4 + 4 + 8 + 4 + 4 + 32
    # header + tag + hosts map (count 4 + key "c1" 8 + value 4) + duration 8
    assert cdr_size(Request(hosts={"c1": 3}, duration=2.0)) == 12 + 4 + 4 + 8 + 4 + 8
    assert cdr_size(Done()) == 16
