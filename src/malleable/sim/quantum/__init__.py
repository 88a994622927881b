"""A quantum-stepped simulator for hierarchical scheduling (the AC-DS paper, section 4).

* :mod:`.profiles` -- the seven parallelism curves and their discretisation;
* :mod:`.jobs` -- malleable jobs from Downey's model, as flat numpy arrays;
* :mod:`.engine` -- the quantum loop (policies from :mod:`malleable.policies.hierarchical`);
* :mod:`.scenario` -- random trees with jobs, and batched runs with their metrics.

It is a different engine from :mod:`malleable.sim` (event-driven, through the
manager): the paper's model advances in scheduling quanta, and the experiments need
millions of job-quanta per second of sweep.
"""
