"""The resize-latency benchmark's reading of a journal: decision-to-confirmed seconds,
for a resize answered at once and for one answered pending (recorded at its answer)."""

from __future__ import annotations

from pathlib import Path

from benchmarks.bench_resize_outage import latencies

from malleable.adapters.slurm.resize import Outcome, ResizeResult
from malleable.model import JobState, Operation
from malleable.resources import JobEvent
from malleable.store import Store


def _resize(store: Store, job: str, before: int, after: int, seconds: float) -> None:
    token = store.resize_begin("vu", job, 7, before, after)
    store.resize_end(token, ResizeResult(7, before, after, after, Outcome.DONE, "", seconds))


def test_a_shrink_answered_at_once_counts_from_the_decision_a_pending_grow_its_resize(
        tmp_path: Path) -> None:
    path = tmp_path / "state.sqlite"
    store = Store.open(path)
    store.job_event(JobEvent(10.0, "a", JobState.RUNNING, 4))
    # shrink 4 -> 2 decided at 20 (model seconds), confirmed at 30: answered at once
    store.operation(Operation(20.0, "shrink", "a", "vu", 2))
    _resize(store, "a", 4, 2, 0.25)
    store.job_event(JobEvent(30.0, "a", JobState.RUNNING, 2))
    # grow 2 -> 6 answered pending: the operation is recorded at the answer's time
    _resize(store, "a", 2, 6, 0.75)
    store.job_event(JobEvent(50.0, "a", JobState.RUNNING, 6, answer="grow", amount=4))
    store.operation(Operation(50.0, "grow", "a", "vu", 4))
    # a grow never confirmed
    store.operation(Operation(60.0, "grow", "a", "vu", 1))
    store.close()

    out = latencies(path, 0.1, None, 0.0)
    assert out["shrink"].seconds == [1.0]  # (30 - 20) model seconds at time scale 0.1
    assert out["grow"].seconds == [0.75] and out["grow"].unconfirmed == 1
    assert sorted(out["grow"].resizer + out["shrink"].resizer) == [0.25, 0.75]
    # a window (real seconds) keeps only the resizes decided in it
    assert latencies(path, 0.1, (4.0, 6.0), 0.0)["shrink"].seconds == []
