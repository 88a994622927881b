"""A test-only fault-injection hook: the manager kills itself at a journal boundary.

``MALLEABLE_KILL_AT=<boundary>:<n>`` makes the process SIGKILL itself (as ``kill -9``
would: no cleanup, no flush, no ``finally``) the ``n``-th time it reaches
``boundary``. The boundaries are the journal's writes around each external side
effect (:data:`BOUNDARIES`); the fault-injection suite
(``benchmarks/bench_killpoints.py``, ``tests/integration/test_kill_points.py``) kills
the manager at each one, restarts it and checks that nothing was lost, duplicated or
left behind. Unset (always, outside those tests), :func:`reached` does nothing.
"""

from __future__ import annotations

import os
import signal
import sys

ENV = "MALLEABLE_KILL_AT"

BOUNDARIES = (
    "submit.before",    # the submit intent is journaled; sbatch not run yet
    "submit.after",     # sbatch answered; its id not journaled yet
    "submit.done",      # the Slurm id is journaled
    "helper.granted",   # a helper allocation exists; its id journaled
    "handover.before",  # about to hand the helper's nodes to the job
    "handover.given",   # the helper's nodes given (NumNodes=0); the job not told (ALL)
    "handover.after",   # handed over; the job's size not read back yet
    "shrink.before",    # the shrink intent is journaled; scontrol not run yet
    "shrink.after",     # scontrol update ran; the outcome not journaled yet
    "cancel.before",    # the cancel intent is journaled; scancel not run yet
    "cancel.after",     # scancel ran; the intent not closed yet
)

_seen: dict[str, int] = {}


def _target() -> tuple[str, int] | None:
    text = os.environ.get(ENV, "")
    if not text:
        return None
    name, _, count = text.partition(":")
    if name not in BOUNDARIES:
        raise ValueError(f"{ENV}={text!r}: unknown boundary; valid: {', '.join(BOUNDARIES)}")
    return name, int(count or "1")


def reached(boundary: str) -> None:
    """Count ``boundary``; SIGKILL this process if it is the one ``MALLEABLE_KILL_AT`` names."""
    target = _target()
    if target is None or target[0] != boundary:
        return
    _seen[boundary] = _seen.get(boundary, 0) + 1
    if _seen[boundary] == target[1]:
        sys.stderr.write(f"malleable: killed at {boundary}:{target[1]} ({ENV})\n")
        sys.stderr.flush()
        os.kill(os.getpid(), signal.SIGKILL)
