"""Small builders shared by the unit tests."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from malleable.model import (
    Action,
    ClusterView,
    Grow,
    JobKind,
    JobSpec,
    Place,
    RunningJob,
    Shrink,
    SizeRule,
)


def mjob(job_id: str, lo: int = 2, hi: int = 46, init: int = 2, *, rule: SizeRule = SizeRule.ANY,
         submit: float = 0.0, kind: JobKind = JobKind.MALLEABLE) -> JobSpec:
    return JobSpec(job_id, kind, lo, hi, init, submit_time=submit, app="gadget2", size_rule=rule)


def rigid(job_id: str, size: int = 2, submit: float = 0.0) -> JobSpec:
    return JobSpec(job_id, JobKind.RIGID, size, size, size, submit_time=submit, app="gadget2")


def running(spec: JobSpec, size: int, start: float, cluster: str = "c",
            releasing: int = 0) -> RunningJob:
    return RunningJob(spec, cluster, size, start, True, releasing)


def cluster(name: str, nodes: int, jobs: Iterable[RunningJob] = (), reserve: int = 0,
            idle: int | None = None) -> ClusterView:
    jobs = list(jobs)
    used = sum(j.size for j in jobs)
    return ClusterView(name, nodes, nodes - used if idle is None else idle, reserve,
                       {j.id: j for j in jobs})


def drive(decision: Any, answer: Callable[[Action], int | None]) -> list[tuple[Action, Any]]:
    """Run a policy decision, answering each action; return (action, answer) pairs."""
    log: list[tuple[Action, Any]] = []
    send = getattr(decision, "send", None)
    iterator = iter(decision)
    reply: Any = None
    while True:
        try:
            action = send(reply) if send else next(iterator)
        except StopIteration:
            return log
        reply = answer(action)
        log.append((action, reply))


def by_spec(jobs: dict[str, JobSpec], sizes: dict[str, int], free: dict[str, int] | None = None
            ) -> Callable[[Action], int | None]:
    """Answer as the jobs' own rules would (sizes are updated as answers are given)."""

    def answer(action: Action) -> int | None:
        if isinstance(action, Grow):
            got = jobs[action.job_id].accepts(sizes[action.job_id], action.offer)
            sizes[action.job_id] += got
            return got
        if isinstance(action, Shrink):
            got = jobs[action.job_id].releases(sizes[action.job_id], action.amount)
            sizes[action.job_id] -= got
            return got
        if isinstance(action, Place):
            return action.size
        return None

    return answer
