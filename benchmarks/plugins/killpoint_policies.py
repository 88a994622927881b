"""A test-only policy plug-in: KOALA's FPSMA that also cancels chosen running jobs.

No built-in policy ever cancels a running job, so the Slurm adapter's cancel (and its
``cancel.before`` / ``cancel.after`` kill points) is never reached by ``manager run``
with them. ``benchmarks/bench_killpoints.py`` puts this directory on ``PYTHONPATH``:
the ``.dist-info`` next to this file registers the policy ``cancelling-fpsma`` in the
``malleable.policies`` entry-point group, as an installed plug-in would.

``cancelling-fpsma`` runs FPSMA (``approach``), then cancels each job of ``cancel``
once it has run ``after`` workload seconds. It remembers what it cancelled only in
memory: after a restart it may cancel a job again, which the adapter must bear.
"""

from __future__ import annotations

from collections.abc import Generator

from malleable.model import Action, Cancel, View
from malleable.policies.base import negotiate
from malleable.policies.koala import KoalaPolicy


class CancellingPolicy:
    """FPSMA, then a :class:`~malleable.model.Cancel` for each chosen job that ran long enough."""

    def __init__(self, inner: KoalaPolicy, cancel: tuple[str, ...], after: float) -> None:
        self.inner = inner
        self.cancel = cancel
        self.after = after
        self.cancelled: set[str] = set()

    @property
    def name(self) -> str:
        return self.inner.name

    def decide(self, view: View, now: float) -> Generator[Action, int | None, None]:
        yield from negotiate(self.inner.decide(view, now))
        for job_id in self.cancel:
            job = view.job(job_id)
            if (job is not None and job.managed and job_id not in self.cancelled
                    and now - job.start_time >= self.after):
                self.cancelled.add(job_id)
                yield Cancel(job_id, "cancelled by the kill-point suite's policy")


def cancelling_fpsma(approach: str = "pwa", cancel: list[str] | None = None,
                     after: float = 30.0) -> CancellingPolicy:
    """FPSMA that also cancels the running jobs ``cancel`` once they ran ``after`` s."""
    return CancellingPolicy(KoalaPolicy.named(approach, "fpsma"), tuple(cancel or ()),
                            after)
