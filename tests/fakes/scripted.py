"""A scripted resource manager, a scripted policy and a recording journal.

:class:`ScriptedCluster` is a :class:`~malleable.resources.ResourceManager` whose
answers the test sets: it grants a start up to its idle nodes (or what ``grants``
says), answers grows and shrinks from ``grow_answers``/``shrink_answers`` (default:
all of it), and hands out the events a test queued with :meth:`ScriptedCluster.emit`.
Every call is logged in ``calls``. :class:`ScriptedPolicy` yields the actions of a
script (a function of the view) and records the answers the manager sent back.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from malleable.adapters.shell import Result
from malleable.model import (
    Action,
    ClusterView,
    JobSpec,
    JobState,
    Operation,
    RunningJob,
    View,
)
from malleable.resources import Capability, JobEvent


@dataclass
class ScriptedCluster:
    """A resource manager whose answers are scripted (see the module docstring)."""

    name: str = "c"
    nodes: int = 8
    capabilities: frozenset[Capability] = frozenset({Capability.SHRINK, Capability.EXPAND})
    grants: dict[str, int] = field(default_factory=dict)
    grow_answers: dict[str, int] = field(default_factory=dict)
    shrink_answers: dict[str, int] = field(default_factory=dict)
    calls: list[tuple[Any, ...]] = field(default_factory=list)
    running: dict[str, RunningJob] = field(default_factory=dict)
    closed: int = 0
    _events: list[JobEvent] = field(default_factory=list)

    @property
    def idle(self) -> int:
        return self.nodes - sum(j.size for j in self.running.values())

    def observe(self) -> ClusterView:
        self.calls.append(("observe",))
        return ClusterView(self.name, self.nodes, self.idle, 0,
                           MappingProxyType(dict(self.running)))

    def start(self, spec: JobSpec, size: int) -> int:
        self.calls.append(("start", spec.id, size))
        granted = min(self.grants.get(spec.id, size), self.idle)
        if granted > 0:
            self.running[spec.id] = RunningJob(spec, self.name, granted, 0.0)
        return max(0, granted)

    def offer_grow(self, job_id: str, offer: int) -> int:
        self.calls.append(("grow", job_id, offer))
        return min(offer, self.grow_answers.get(job_id, offer))

    def request_shrink(self, job_id: str, amount: int, mandatory: bool) -> int:
        self.calls.append(("shrink", job_id, amount, mandatory))
        return min(amount, self.shrink_answers.get(job_id, amount))

    def cancel(self, job_id: str) -> None:
        self.calls.append(("cancel", job_id))
        self.running.pop(job_id, None)

    def emit(self, event: JobEvent) -> None:
        """Queue an event for the next :meth:`drain_events`."""
        self._events.append(event)

    def drain_events(self) -> Sequence[JobEvent]:
        self.calls.append(("drain",))
        events, self._events = self._events, []
        return events

    def close(self) -> None:
        self.closed += 1

    def verbs(self) -> list[str]:
        """The calls' names, without the observe/drain of every cycle."""
        return [c[0] for c in self.calls if c[0] not in ("observe", "drain")]


Script = Callable[[View, float], Sequence[Action]]


@dataclass
class ScriptedPolicy:
    """Yields ``script(view, now)``'s actions one by one; records what it was answered.

    ``during`` runs after every answer with the view being decided on (a test checks
    there that the view did not change under the policy).
    """

    script: Script
    name: str = "scripted"
    answers: list[tuple[Action, int | None]] = field(default_factory=list)
    views: list[View] = field(default_factory=list)
    during: Callable[[View], None] | None = None

    def decide(self, view: View, now: float) -> Generator[Action, int | None, None]:
        self.views.append(view)
        for action in self.script(view, now):
            answer = yield action
            self.answers.append((action, answer))
            if self.during is not None:
                self.during(view)


@dataclass
class RecordingJournal:
    """A journal that keeps its calls in order: ("submitted", id), ("operation", op)..."""

    calls: list[tuple[str, Any]] = field(default_factory=list)

    def job_submitted(self, spec: JobSpec) -> None:
        self.calls.append(("submitted", spec.id))

    def operation(self, op: Operation) -> None:
        self.calls.append(("operation", op))

    def job_event(self, event: JobEvent) -> None:
        self.calls.append(("event", event))


class RecordingRunner:
    """A CommandRunner that records each argv (and its standard input) and gives one
    answer to all of them."""

    def __init__(self, answer: Result | None = None) -> None:
        self.answer = answer or Result(0, "4242\n", "")
        self.calls: list[list[str]] = []
        self.inputs: list[str | None] = []

    def run(self, argv: Sequence[str], timeout: float, *, input: str | None = None,
            check: bool = True) -> Result:
        self.calls.append(list(argv))
        self.inputs.append(input)
        return self.answer

    def close(self) -> None:
        return None


def started(job_id: str, time: float, size: int) -> JobEvent:
    return JobEvent(time, job_id, JobState.RUNNING, size)
