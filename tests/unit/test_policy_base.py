"""The shared pieces of every policy: answers, relaying a negotiation, feasibility."""

from __future__ import annotations

from collections.abc import Generator

from malleable.model import Action, Grow, Reject, Shrink, View, WaitingJob
from malleable.policies.base import (
    Negotiating,
    answered,
    infeasible,
    largest_offer,
    negotiate,
    next_action,
    relay,
)
from tests.fakes.builders import cluster, rigid


def test_answered_counts_none_as_zero() -> None:
    assert (answered(None), answered(0), answered(3)) == (0, 0, 3)


def _inner() -> Negotiating[int]:
    got = answered((yield Grow("a", 4)))
    got += answered((yield Shrink("b", 2)))
    return got


def test_relay_forwards_answers_notes_them_and_returns_the_inner_value() -> None:
    notes: list[tuple[Action, int]] = []
    outer = relay(_inner(), lambda action, nodes: notes.append((action, nodes)))
    assert next_action(outer, None) == Grow("a", 4)
    assert next_action(outer, 3) == Shrink("b", 2)
    try:
        outer.send(None)
    except StopIteration as done:
        assert done.value == 3
    assert notes == [(Grow("a", 4), 3), (Shrink("b", 2), 0)]


def test_a_plain_list_negotiates_ignoring_answers() -> None:
    steps = negotiate([Grow("a", 1)])
    assert next_action(steps, None) == Grow("a", 1)
    assert next_action(steps, 7) is None


class _Steps(Generator[Action, "int | None", None]):
    """A generator that is not Python's (as a compiled policy's are): it takes answers."""

    def __init__(self) -> None:
        self.answers: list[int | None] = []

    def send(self, value: int | None) -> Action:
        self.answers.append(value)
        if len(self.answers) > 2:
            raise StopIteration
        return Grow("a", len(self.answers))

    def throw(self, *args: object) -> Action:
        raise StopIteration


def test_another_generator_type_is_negotiated_with_answers_first_time_and_later() -> None:
    for _ in range(2):  # the second time, its type is known
        steps = _Steps()
        assert negotiate(steps) is steps
        assert next_action(steps, None) == Grow("a", 1)
        assert next_action(steps, 5) == Grow("a", 2)
        assert next_action(steps, 6) is None
        assert steps.answers == [None, 5, 6]


def test_feasibility_against_the_largest_cluster_outside_its_reserve() -> None:
    view = View(0.0, {"x": cluster("x", 8, reserve=2), "y": cluster("y", 5)},
                [WaitingJob(rigid("j", 7))])
    assert largest_offer(view) == 6
    assert largest_offer(View(0.0, {}, [])) == 0
    assert infeasible("j", 6, 6) is None
    assert infeasible("j", 7, 6) == Reject("j", "needs 7 nodes, the largest cluster offers 6")
