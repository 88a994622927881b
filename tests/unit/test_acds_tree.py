"""Scheduler trees, quantum patterns, Desire-Sum, hierarchical DEQ and reallocation cost."""

from __future__ import annotations

import numpy as np
import pytest

from malleable.policies.hierarchical.scheduler import JobsInput, Rule, TreeScheduler
from malleable.policies.hierarchical.tree import (
    QuantumPattern,
    TreeLayout,
    chain,
    forest,
    leaf_offsets,
    random_tree,
)


def _two_leaves() -> TreeLayout:
    """K = 3: a root with two leaves (nodes 0 and 1 of level 2)."""
    return TreeLayout((2, 1), (np.array([0, 0]),))


def _jobs(leaf: list[int], desire: list[float], previous: list[float] | None = None
          ) -> JobsInput:
    n = len(leaf)
    return JobsInput(np.array(leaf, dtype=np.int64), np.array(desire, dtype=float),
                     np.ones(n, dtype=bool), np.zeros(n) if previous is None else
                     np.array(previous, dtype=float))


def test_quanta_are_powers_of_the_factor() -> None:
    assert QuantumPattern.geometric(5, 1).multiples == (1, 1, 1, 1)
    assert QuantumPattern.geometric(5, 2).multiples == (1, 2, 4, 8)
    assert QuantumPattern.geometric(5, 3).multiples == (1, 3, 9, 27)
    assert QuantumPattern.geometric(2, 6).multiples == (1,)


def test_a_quantum_must_be_a_multiple_of_the_level_below() -> None:
    QuantumPattern((1, 2, 6))
    with pytest.raises(ValueError, match="multiple"):
        QuantumPattern((1, 2, 3))
    with pytest.raises(ValueError, match="start with 1"):
        QuantumPattern((2, 4))
    with pytest.raises(ValueError):
        QuantumPattern.geometric(3, 0)


def test_which_levels_expire() -> None:
    q = QuantumPattern((1, 2, 4, 8))  # levels 2..5
    assert [q.top_expiring(i) for i in range(9)] == [5, 2, 3, 2, 4, 2, 3, 2, 5]
    assert q.top_between(3, 5) == 4  # the boundary at 4 was crossed
    assert q.top_between(4, 5) == 2
    assert q.top_between(1, 17) == 5


def test_random_trees_have_all_leaves_at_level_two_and_fanout_one_to_five() -> None:
    rng = np.random.default_rng(3)
    for levels in (2, 3, 4, 5):
        tree = random_tree(levels, rng)
        assert tree.levels == levels and tree.roots == 1
        for level in range(2, levels):
            fan = np.bincount(tree.parent(level), minlength=tree.count(level + 1))
            assert fan.min() >= 1 and fan.max() <= 5
    assert random_tree(2, rng).counts == (1,)


def test_forest_keeps_each_tree_apart() -> None:
    a, b = _two_leaves(), chain(3)
    both = forest([a, b])
    assert both.counts == (3, 2)
    assert both.parent(2).tolist() == [0, 0, 1]
    assert leaf_offsets([a, b]).tolist() == [0, 2]
    assert both.root_of_leaves().tolist() == [0, 0, 1]


def test_a_layout_with_a_childless_node_is_refused() -> None:
    with pytest.raises(ValueError, match="child"):
        TreeLayout((2, 2), (np.array([0, 0]),))


def test_desire_sum_adds_the_children() -> None:
    s = TreeScheduler(_two_leaves(), QuantumPattern((1, 1)), 100.0)
    r = s.reallocate(3, _jobs([0, 0, 1], [1, 2, 3]))
    assert r.desires[2].tolist() == [3, 3]
    assert r.desires[3].tolist() == [6]
    assert r.jobs.tolist() == [1, 2, 3]  # everyone satisfied, 94 processors idle


def test_deq_runs_at_every_level() -> None:
    s = TreeScheduler(_two_leaves(), QuantumPattern((1, 1)), 10.0)
    r = s.reallocate(3, _jobs([0, 1, 1], [3, 2, 10]))
    # root: leaves want 3 and 12, share 5 -> 3 and 7; leaf 1: jobs want 2 and 10 of 7 -> 2, 5
    assert r.nodes[2].tolist() == [3, 7]
    assert r.jobs.tolist() == [3, 2, 5]


def test_a_deprived_job_has_deprived_ancestors() -> None:
    s = TreeScheduler(random_tree(4, np.random.default_rng(0)), QuantumPattern((1, 1, 1)), 64.0)
    rng = np.random.default_rng(1)
    leaf = rng.integers(0, s.layout.count(2), 40)
    desire = rng.uniform(1, 10, 40)
    r = s.reallocate(4, _jobs(leaf.tolist(), desire.tolist()))
    deprived = r.jobs < desire - 1e-9
    assert deprived.any()
    node = leaf[deprived]
    for level in (2, 3):
        assert np.all(r.nodes[level][node] < r.desires[level][node] - 1e-9)
        node = s.layout.parent(level)[node]


def test_lower_levels_reallocate_within_what_the_level_above_gave() -> None:
    s = TreeScheduler(_two_leaves(), QuantumPattern((1, 2)), 10.0)
    s.reallocate(3, _jobs([0, 1], [3, 2]))  # leaves get 3 and 2, 5 idle at the root
    r = s.reallocate(2, _jobs([0, 1], [8, 2], [3, 2]))
    assert r.top == 2 and 3 not in r.desires  # the root was not asked
    assert r.jobs.tolist() == [3, 2]  # leaf 0 still has 3, whatever job 0 wants now
    r = s.reallocate(3, _jobs([0, 1], [8, 2], [3, 2]))
    assert r.jobs.tolist() == [8, 2]


def test_equi_splits_among_children_with_unfinished_jobs() -> None:
    tree = TreeLayout((3, 1), (np.array([0, 0, 0]),))
    s = TreeScheduler(tree, QuantumPattern((1, 1)), 12.0, Rule.EQUI)
    r = s.reallocate(3, _jobs([0, 0, 2], [1, 1, 1]))
    assert r.nodes[2].tolist() == [6, 0, 6]  # leaf 1 has no jobs
    assert r.jobs.tolist() == [3, 3, 6]


def test_caps_bound_what_a_node_reports() -> None:
    caps = {2: np.array([4.0, 100.0])}
    s = TreeScheduler(_two_leaves(), QuantumPattern((1, 1)), 20.0, caps=caps)
    r = s.reallocate(3, _jobs([0, 1], [10, 30]))
    assert r.desires[2].tolist() == [4, 30]
    assert r.nodes[2].tolist() == [4, 16]


def test_integral_mode_allocates_whole_processors_down_the_tree() -> None:
    s = TreeScheduler(_two_leaves(), QuantumPattern((1, 1)), 11.0, integral=True)
    r = s.reallocate(3, _jobs([0, 0, 1], [4.5, 4.5, 20]))
    # leaves want 9 and 20: 5.5 each, the odd processor to the larger desire (leaf 1)
    assert r.nodes[2].tolist() == [5, 6]
    # leaf 0 splits 5 between two jobs wanting 5 each: 2 each, the odd one to the first
    assert r.jobs.tolist() == [3, 2, 6]


def test_a_move_within_a_leaf_costs_one_level() -> None:
    s = TreeScheduler(_two_leaves(), QuantumPattern((1, 2)), 10.0, cost_factor=0.1)
    s.reallocate(3, _jobs([0, 0], [5, 5]))
    r = s.reallocate(2, _jobs([0, 0], [8, 2], [5, 5]))  # 3 processors move inside leaf 0
    assert r.jobs.tolist() == [8, 2]
    assert np.allclose(r.charge, [0.3, 0.0])
    assert r.moved == 3


def test_a_move_across_the_root_costs_every_level_it_descends() -> None:
    s = TreeScheduler(_two_leaves(), QuantumPattern((1, 1)), 10.0, cost_factor=0.1)
    first = s.reallocate(3, _jobs([0, 1], [5, 5]))
    # new processors: each job gains 5 and so does its leaf -> 5 * 0.1 * 2 levels
    assert np.allclose(first.charge, [1.0, 1.0])
    r = s.reallocate(3, _jobs([0, 1], [8, 2], [5, 5]))  # 3 move from leaf 1 to leaf 0
    assert r.nodes[2].tolist() == [8, 2]
    assert np.allclose(r.charge, [0.3 * 2, 0.0])
    assert r.moved == 6  # 3 gained by leaf 0 and 3 by its job


def test_no_cost_when_the_factor_is_zero() -> None:
    s = TreeScheduler(_two_leaves(), QuantumPattern((1, 1)), 10.0)
    assert s.reallocate(3, _jobs([0, 1], [5, 5])).charge.tolist() == [0, 0]


def test_top_level_out_of_range_is_refused() -> None:
    s = TreeScheduler(_two_leaves(), QuantumPattern((1, 1)), 10.0)
    with pytest.raises(ValueError):
        s.reallocate(4, _jobs([0], [1]))
    with pytest.raises(ValueError):
        TreeScheduler(_two_leaves(), QuantumPattern((1,)), 10.0)
