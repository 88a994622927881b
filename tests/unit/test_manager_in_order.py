"""The manager skips the decision of a policy that ``waits_in_order`` (FCFS) when it would
decide nothing new: the same schedule, the same failed tries, fewer decisions."""

from __future__ import annotations

import random
from collections.abc import Iterable
from dataclasses import dataclass

from malleable.manager import Manager
from malleable.model import Action, Cluster, JobKind, JobSpec, View
from malleable.policies.fcfs import FCFS
from malleable.sim.cluster import SimCluster
from malleable.sim.engine import END, Engine
from malleable.sim.run import SimConfig, simulate


@dataclass
class Counted:
    """FCFS's decisions, counted; ``in_order`` says whether it declares ``waits_in_order``."""

    in_order: bool
    decisions: int = 0
    name: str = "fcfs"

    def __getattr__(self, attr: str) -> object:
        if attr == "waits_in_order" and self.in_order:
            return True
        raise AttributeError(attr)

    def decide(self, view: View, now: float) -> Iterable[Action]:
        self.decisions += 1
        return FCFS().decide(view, now)


def rigid(job_id: str, size: int, submit: float, runtime: float) -> JobSpec:
    return JobSpec(job_id, JobKind.RIGID, size, size, size, submit, app="fixed",
                   runtime=runtime)


def test_a_blocked_head_is_deferred_without_a_decision_until_a_cluster_changes() -> None:
    engine = Engine()
    cluster = SimCluster("c", 4, engine)
    policy = Counted(in_order=True)
    manager = Manager(policy, {"c": cluster})
    manager.submit(rigid("a", 3, 0.0, 10.0))
    manager.cycle(0.0)  # a starts
    manager.submit(rigid("b", 2, 1.0, 5.0))
    manager.cycle(1.0)  # b does not fit: decided, deferred
    assert policy.decisions == 2 and manager.waiting_ids() == ["b"]
    manager.submit(rigid("c", 1, 2.0, 5.0))
    manager.cycle(2.0)  # only an arrival behind b: no decision, b's try counted
    manager.cycle(3.0)
    assert policy.decisions == 2
    assert manager.export_state()["tries"] == {"b": 3}
    engine.at(10.0, lambda: None, END)
    engine.run(until=10.0)  # a ends: the cluster changed, FCFS decides and starts b and c
    manager.cycle(10.0)
    assert policy.decisions == 3 and manager.waiting_ids() == []


def test_the_schedule_and_the_tries_are_those_of_the_decision_every_cycle() -> None:
    rnd = random.Random(7)
    jobs = [rigid(f"j{i}", rnd.randint(1, 16), float(rnd.randint(0, 400)),
                  float(rnd.randint(1, 60))) for i in range(400)]
    runs = {}
    for in_order in (True, False):
        policy = Counted(in_order)
        result = simulate(list(jobs), [Cluster("c", 16)], policy, SimConfig(max_tries=25))
        runs[in_order] = (policy.decisions, [(r.spec.id, r.start, r.end, r.state, r.reason)
                                             for r in result.records])
    assert runs[True][1] == runs[False][1]
    assert any(state.value == "failed" for *_, state, _ in runs[True][1])  # tries did count
    assert runs[True][0] < runs[False][0]
