"""Hierarchical scheduling of malleable jobs: AC-DS, AG-DS and EQUI-EQUI.

Pure parts (no I/O, no clock), shared by the quantum simulator and the real-site
policy:

* :mod:`.deq` -- DEQ (Algorithm 1), fractional and integral, and EQUI;
* :mod:`.estimators` -- A-Control and A-Greedy desire estimators;
* :mod:`.tree` -- scheduler trees of any depth and their per-level quanta;
* :mod:`.scheduler` -- Desire-Sum up, DEQ/EQUI down, reallocation cost;
* :mod:`.policy` -- the tree as a :class:`~malleable.policies.base.Policy` for the
  manager (grid -> site -> groups -> jobs), configured by :mod:`.config`.
"""
