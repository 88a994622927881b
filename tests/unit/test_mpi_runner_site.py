"""MpiSite (the manager's view of MPI jobs), the demo schedule and the app command's input
checks, against the fake site of tests/fakes/mpi_site.py."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from malleable.cli import main
from malleable.errors import InputError
from malleable.model import ClusterView, JobKind, JobSpec, RunningJob
from malleable.resources import Capability, JobEvent
from malleable.runner.demo import (
    _slurm_nodes,
    boundaries,
    example_source,
    parse_schedule,
    run_schedule,
)
from malleable.runner.job import MpiJob
from malleable.runner.launch import Launch
from malleable.runner.nodes import NodeShell
from malleable.runner.site import MpiPayload, MpiSite
from tests.fakes.mpi_site import FakeCtl, FakeResizer, FakeSite

MPI_SPEC = JobSpec("a", JobKind.MALLEABLE, 1, 6, 2, app="mpi:jacobi", preferred_size=2)
RIGID = JobSpec("r", JobKind.RIGID, 2, 2, 2, app="fixed", runtime=10.0)


def programs(spec: JobSpec) -> Launch | None:
    return Launch("app.py", "print(1)\n") if spec.app.startswith("mpi:") else None


@dataclass
class FakeCluster:
    """The parts of SlurmCluster that MpiSite uses."""

    site: FakeSite
    name: str = "vu"
    capabilities: frozenset[Capability] = frozenset({Capability.SHRINK, Capability.EXPAND})
    calls: list[tuple[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.ctl = FakeCtl(self.site)
        self.resizer = FakeResizer(self.site)

    def observe(self) -> ClusterView:
        running = {"a": RunningJob(MPI_SPEC, "vu", len(self.site.alloc), 0.0)}
        return ClusterView("vu", 6, len(self.site.free), running=running)

    def drain_events(self) -> list[JobEvent]:
        return []

    def start(self, spec: JobSpec, size: int) -> int:
        self.calls.append(("start", spec.id))
        return size

    def slurm_id(self, job_id: str) -> int | None:
        return 7

    def offer_grow(self, job_id: str, offer: int) -> int:
        self.calls.append(("grow", job_id))
        return offer

    def request_shrink(self, job_id: str, amount: int, mandatory: bool) -> int:
        self.calls.append(("shrink", job_id))
        return amount

    def cancel(self, job_id: str) -> None:
        self.calls.append(("cancel", job_id))

    def invalidate(self) -> None:
        self.calls.append(("invalidate", ""))


def make_site() -> tuple[MpiSite, FakeSite, FakeCluster]:
    fake = FakeSite()
    fake.files[("c0", ".malleable/run/7/nodes")] = "n1 c0\nn2 c0\n"
    cluster = FakeCluster(fake)
    site = MpiSite(cluster, NodeShell(fake), programs)  # type: ignore[arg-type]
    site.start(MPI_SPEC, 2)
    site.jobs["a"].sleep = lambda s: None
    site.jobs["a"].poll = 0.0
    site.jobs["a"].rejoin_gap = 0.0
    return site, fake, cluster


def test_mpi_jobs_go_to_the_runner_and_answer_with_what_the_program_took() -> None:
    site, fake, cluster = make_site()
    assert site.name == "vu" and Capability.FEEDBACK in site.capabilities
    assert site.offer_grow("a", 3) == 3 and fake.alloc == ["n1", "n2", "n3", "n4", "n5"]
    assert site.request_shrink("a", 2, mandatory=True) == 2 and len(fake.alloc) == 3
    assert ("grow", "a") not in cluster.calls  # the runner did it, not the sleep adapter


def test_other_jobs_go_to_the_wrapped_cluster() -> None:
    site, _, cluster = make_site()
    site.start(RIGID, 2)
    assert site.offer_grow("r", 1) == 1 and site.request_shrink("r", 1, False) == 1
    site.cancel("r")
    assert ("grow", "r") in cluster.calls and ("cancel", "r") in cluster.calls


def test_program_requests_shrink_now_or_show_up_as_feedback() -> None:
    site, fake, _ = make_site()
    site.jobs["a"].wait_started(1)
    ch = ".malleable/run/7/ch"
    fake.files[("c0", f"{ch}/request-1.json")] = json.dumps({"n": 1, "target": 5})
    view = site.observe()
    assert view.running["a"].feedback["requested"] == 5.0
    site.offer_grow("a", 3)
    assert "a" not in site.requested  # the grow reached the request
    fake.files[("c0", f"{ch}/request-2.json")] = json.dumps({"n": 2, "target": 1})
    site.observe()
    assert site.jobs["a"].size == 1 and fake.alloc == ["n1"]  # a voluntary shrink, done


def test_a_grow_request_is_capped_at_the_maximum_and_ends_with_its_job() -> None:
    site, fake, _ = make_site()
    site.jobs["a"].wait_started(1)
    ch = ".malleable/run/7/ch"
    fake.files[("c0", f"{ch}/request-1.json")] = json.dumps({"n": 1, "target": 40})
    assert site.observe().running["a"].feedback["requested"] == 6.0  # MPI_SPEC max is 6
    fake.files[("c0", f"{ch}/request-2.json")] = json.dumps({"n": 2, "target": 3})
    assert site.observe().running["a"].feedback["requested"] == 3.0  # the latest one counts
    fake.files[("c0", f"{ch}/exit")] = "0\n"  # mpirun ended: the request goes with it
    assert "requested" not in site.observe().running["a"].feedback
    assert site.requested == {}


def test_observing_notices_a_started_job_and_its_request_without_waiting() -> None:
    site, fake, _ = make_site()
    fake.state = "PENDING"
    fake.files[("c0", ".malleable/run/7/ch/request-1.json")] = json.dumps({"n": 1,
                                                                               "target": 4})
    assert "requested" not in site.observe().running["a"].feedback  # not started yet
    assert site.jobs["a"].nodes == []
    fake.state = "RUNNING"
    assert site.observe().running["a"].feedback["requested"] == 4.0
    assert [n for n, _ in site.jobs["a"].nodes] == ["n1", "n2"]


def test_a_job_that_failed_before_starting_is_skipped_quietly() -> None:
    site, fake, _ = make_site()
    fake.state = "FAILED"
    assert "requested" not in site.observe().running["a"].feedback
    assert site.requested == {}


def test_cancelling_a_job_drops_its_grow_request() -> None:
    site, fake, _ = make_site()
    site.jobs["a"].wait_started(1)
    fake.files[("c0", ".malleable/run/7/ch/request-1.json")] = json.dumps({"n": 1,
                                                                               "target": 4})
    site.observe()
    assert site.requested == {"a": 4}
    site.cancel("a")
    assert site.requested == {}


def test_cancel_of_an_mpi_job_goes_through_the_runner() -> None:
    site, fake, _ = make_site()
    site.jobs["a"].wait_started(1)
    site.cancel("a")
    assert fake.cancelled[0] == 7 and "a" not in site.jobs


def test_payload_gives_mpi_jobs_their_batch_script() -> None:
    payload = MpiPayload(programs=programs, time_limit=30)
    assert "mpirun" in payload.script(MPI_SPEC) and payload.time_limit_minutes(MPI_SPEC) == 30
    assert "mpirun" not in payload.script(RIGID) and payload.time_limit_minutes(RIGID) >= 5


def test_schedule_parsing_and_phase_boundaries() -> None:
    assert parse_schedule("2,4,2") == [2, 4, 2]
    assert boundaries([2, 4, 2], 60) == [20, 40]
    for bad in ("2,x", "0,2", ""):
        with pytest.raises(InputError, match="--schedule"):
            parse_schedule(bad)
    name, text = example_source("fft")
    assert name == "fft.py" and "SizeRule.POW2" in text
    with pytest.raises(InputError, match="not found"):
        example_source("nope")


def test_run_schedule_resizes_at_phase_starts_and_reads_the_result() -> None:
    fake = FakeSite()
    job = MpiJob(FakeCtl(fake), NodeShell(fake), Launch("app.py", ""),  # type: ignore[arg-type]
                 resizer=FakeResizer(fake), sleep=lambda s: None, poll=0.0,  # type: ignore[arg-type]
                 rejoin_gap=0.0)
    ch = ".malleable/run/7/ch"
    fake.files[("c0", ".malleable/run/7/nodes")] = "n1 c0\nn2 c0\n"
    fake.files[("c0", f"{ch}/progress.json")] = '{"iteration": 45}'
    fake.files[("c0", f"{ch}/exit")] = "0"
    fake.files[("c0", ".malleable/run/7/result.json")] = json.dumps(
        {"checksum": 2.5, "phases": [{"size": 2}, {"size": 4}, {"size": 2}]})
    seen: list[int] = []
    run = run_schedule(job, [2, 4, 2], 60, 10, seen.append)
    assert [s.target for s in run.steps] == [4, 2] and [s.slurm_nodes for s in run.steps] == [4, 2]
    assert run.exit_code == 0 and run.checksum == 2.5 and seen[-1] == 60


@pytest.mark.parametrize("argv, message", [
    (["--schedule", "2,x"], "--schedule"),
    (["--iterations", "1"], "cannot hold 3 phases"),
    (["--fixed", "0"], "--fixed"),
    (["--delay", "-1"], "--delay"),
])
def test_app_demo_rejects_bad_input_with_exit_2(argv: list[str], message: str, tmp_path: Path,
                                                capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "c.toml"
    config.write_text('[clusters.vu]\nkind = "slurm"\nnodes = 4\n')
    code = main(["app", "demo", "jacobi", "--config", str(config), "--site", "vu", *argv])
    assert code == 2 and message in capsys.readouterr().err


def test_app_demo_refuses_a_schedule_larger_than_the_site(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "c.toml"
    config.write_text('[clusters.vu]\nkind = "slurm"\nnodes = 4\n')
    code = main(["app", "demo", "jacobi", "--config", str(config), "--site", "vu",
                 "--schedule", "2,8"])
    assert code == 2 and "has 4 nodes; the schedule needs 8" in capsys.readouterr().err


def test_a_step_after_the_job_ended_shows_no_node_count() -> None:
    fake = FakeSite(state="COMPLETED")
    job = MpiJob(FakeCtl(fake), NodeShell(fake), Launch("app.py", ""),  # type: ignore[arg-type]
                 slurm_id=7)
    assert _slurm_nodes(job) is None
    fake.state = "RUNNING"
    assert _slurm_nodes(job) == 2
