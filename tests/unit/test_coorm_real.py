"""The pure parts of CooRM real views: host ids to sites, Slurm polls to background load."""

from __future__ import annotations

import math

import pytest

from malleable.adapters.slurm.ctl import Poll
from malleable.adapters.slurm.parse import SlurmJob, SlurmNode
from malleable.coorm.policy import Busy
from malleable.coorm.real import WalltimePayload, busy_from_poll, site_sizes, time_limit_minutes
from malleable.model import JobKind, JobSpec

EPOCH = 1_700_000_000.0


def _nodes(idle: int, allocated: int, down: int = 0) -> tuple[SlurmNode, ...]:
    states = ["IDLE"] * idle + ["ALLOCATED"] * allocated + ["DOWN"] * down
    return tuple(SlurmNode(f"n{k}", s, partitions=("batch",)) for k, s in enumerate(states))


def _job(job_id: int, nodes: int, end: float | None, state: str = "RUNNING") -> SlurmJob:
    return SlurmJob(job_id, "j", state, nodes, start_time=EPOCH - 100, end_time=end)


def test_site_sizes_counts_hosts_per_site() -> None:
    rids = {"uva": ("uva-h0000", "uva-h0001"), "vu": ()}
    assert site_sizes(rids, ["vu", "uva"]) == {"uva": 2}


@pytest.mark.parametrize("rids", [{"das": ("das-h0000",)}, {"vu": ("uva-h0000",)}])
def test_site_sizes_rejects_foreign_hosts(rids: dict[str, tuple[str, ...]]) -> None:
    with pytest.raises(ValueError):
        site_sizes(rids, ["vu", "uva"])


def test_running_jobs_end_at_their_time_limit_in_service_time() -> None:
    poll = Poll((_job(7, 3, EPOCH + 500),), _nodes(idle=1, allocated=3))
    assert busy_from_poll("vu", poll, 20.0, EPOCH - 20.0) == [Busy("vu", 3, 520.0)]


def test_managed_and_pending_jobs_are_left_out() -> None:
    poll = Poll((_job(7, 2, EPOCH + 500), _job(8, 2, None, "PENDING")),
                _nodes(idle=2, allocated=2))
    assert busy_from_poll("vu", poll, 0.0, EPOCH, managed={7}) == []


def test_overrun_jobs_and_unexplained_nodes() -> None:
    poll = Poll((_job(7, 1, EPOCH - 5), _job(9, 1, None)), _nodes(idle=0, allocated=3, down=1))
    busy = busy_from_poll("vu", poll, 10.0, EPOCH - 10.0)
    assert busy[0] == Busy("vu", 1, 10.0 + 60.0)  # past its limit: gone within the grace
    assert busy[1] == Busy("vu", 1, math.inf)  # no time limit
    assert busy[2] == Busy("vu", 1, math.inf)  # allocated but by no listed job
    assert len(busy) == 3  # the DOWN node is out of service, not busy


def test_partition_and_reserve() -> None:
    nodes = (*_nodes(idle=2, allocated=0), SlurmNode("x", "ALLOCATED", partitions=("other",)))
    assert busy_from_poll("vu", Poll((), nodes), 0.0, EPOCH, partition="batch") == []
    assert busy_from_poll("vu", Poll((), nodes), 0.0, EPOCH, partition="batch",
                          reserve=1) == []


def test_time_limit_is_the_requested_duration_rounded_up() -> None:
    assert [time_limit_minutes(s) for s in (1, 60, 61, 600)] == [1, 1, 2, 10]
    spec = JobSpec("a", JobKind.RIGID, 2, 2, 2, app="fixed", runtime=90.0, walltime=90.0)
    assert WalltimePayload().time_limit_minutes(spec) == 2
    no_wall = JobSpec("b", JobKind.RIGID, 2, 2, 2, app="fixed", runtime=90.0)
    assert WalltimePayload().time_limit_minutes(no_wall) == 5


def test_serve_with_an_unreadable_config_is_an_input_error() -> None:
    from malleable.cli import main
    assert main(["coorm", "serve", "--config", "/nonexistent/clusters.toml"]) == 2


def test_background_ends_do_not_jitter_with_the_clocks() -> None:
    from malleable.coorm.real import SlurmCapSource
    wall = iter([EPOCH + 0.0, EPOCH + 10.013, EPOCH + 20.2, EPOCH + 32.0])
    source = SlurmCapSource({}, epoch=lambda: next(wall))
    assert source.epoch_offset(0.0) == EPOCH
    assert source.epoch_offset(10.0) == EPOCH  # 13 ms of jitter: same offset, same CAP
    assert source.epoch_offset(20.0) == EPOCH
    assert source.epoch_offset(30.0) == EPOCH + 2.0  # drifted by 2 s: re-based


def test_a_background_end_is_bit_for_bit_the_same_on_every_poll() -> None:
    """Regression: ends computed as now + (end - wall_now) moved by ~1e-7 s per poll,
    every view looked new, and the core never started an application on real sites."""
    from types import SimpleNamespace
    from typing import Any

    from malleable.coorm.real import SlurmCapSource
    poll = Poll((_job(7, 4, EPOCH + 595.0521),), _nodes(idle=0, allocated=4))
    ctl = SimpleNamespace(poll=lambda: poll, partition=None)
    site: Any = SimpleNamespace(ctl=ctl, reserve=0)
    nows = [0.001459414, 0.5028621760011447, 1.098022343001503, 7.504909647001114]
    wall = iter([EPOCH + t + j for t, j in zip(nows, (0.0, 0.0031, 0.0007, 0.0122), strict=True)])
    source = SlurmCapSource({"vu": site}, epoch=lambda: next(wall))
    ends = {b.end for now in nows for b in source.busy(now)}
    assert len(ends) == 1 and ends.pop() == pytest.approx(595.0521, abs=1e-6)
