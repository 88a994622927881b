"""A Slurm site whose malleable jobs are real MPI programs: the manager's view of the runner.

:class:`MpiSite` is a :class:`~malleable.resources.ResourceManager`. It wraps a
:class:`~malleable.adapters.slurm.cluster.SlurmCluster` (observation, events,
submission, cancellation) and hands the jobs whose application is an MPI program
(``JobSpec.app == "mpi:NAME"``) to an :class:`~malleable.runner.job.MpiJob`:

* ``offer_grow`` expands the allocation, offers the new nodes to the program and
  returns what it accepted (the rest went back to Slurm);
* ``request_shrink`` asks the program to leave nodes, then shrinks the allocation;
  a mandatory shrink the program does not honour is logged as failed (0 released);
* when the wrapped cluster has :attr:`~malleable.adapters.slurm.cluster.SlurmCluster.
  negotiations`, both answer :data:`~malleable.resources.PENDING` for an MPI job: the
  program's answer (up to ``MpiJob.answer_timeout`` seconds, then as long again to
  withdraw the offer) is awaited in a worker and comes back as a job event; the job's
  own requests are not relayed while it negotiates;
* the program's own requests (``request-N.json``) are relayed as voluntary
  resizes: a request to shrink is carried out at once (the program gives nodes
  back, as in KOALA), a request to grow is kept and shown to policies as the
  job's ``feedback["requested"]`` (capped at the job's maximum) until a grow
  reaches it, a later request replaces it, or the job ends or is cancelled. The
  manager grants it as a voluntary grow from free nodes
  (:mod:`malleable.policies.requests`), whatever its policy.

Other jobs (rigid sleepers...) go to the wrapped cluster unchanged.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from types import MappingProxyType

from malleable.adapters.pending import Negotiations
from malleable.adapters.slurm.cluster import SlurmCluster
from malleable.adapters.slurm.payload import Payload
from malleable.errors import ExternalError
from malleable.model import ClusterView, JobSpec
from malleable.policies.requests import REQUESTED
from malleable.resources import Capability, JobEvent
from malleable.runner.job import MpiJob
from malleable.runner.launch import Launch, batch_script
from malleable.runner.nodes import NodeShell

logger = logging.getLogger(__name__)

Programs = Callable[[JobSpec], Launch | None]
"""Which MPI program a job runs (None: not an MPI job)."""


@dataclass(frozen=True, slots=True)
class MpiPayload(Payload):
    """The batch script of an MPI job's program; the sleep payload for other jobs."""

    programs: Programs | None = None
    time_limit: int = 60

    def script(self, spec: JobSpec) -> str:
        launch = self.programs(spec) if self.programs is not None else None
        return batch_script(launch) if launch is not None else Payload.script(self, spec)

    def time_limit_minutes(self, spec: JobSpec) -> int:
        if self.programs is not None and self.programs(spec) is not None:
            return self.time_limit
        return Payload.time_limit_minutes(self, spec)


@dataclass
class MpiSite:
    """A site whose MPI jobs follow their allocation (see the module docstring)."""

    cluster: SlurmCluster
    shell: NodeShell
    programs: Programs
    start_timeout: float = 120.0
    jobs: dict[str, MpiJob] = field(default_factory=dict)
    specs: dict[str, JobSpec] = field(default_factory=dict)
    requested: dict[str, int] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)
    """Why each job's latest resize did not go as asked (the answer's reason)."""

    @property
    def name(self) -> str:
        return self.cluster.name

    @property
    def capabilities(self) -> frozenset[Capability]:
        return self.cluster.capabilities | {Capability.FEEDBACK}

    def observe(self) -> ClusterView:
        self._relay_requests()
        view = self.cluster.observe()
        if not self.requested:
            return view
        running = dict(view.running)
        for job_id, asked in list(self.requested.items()):
            job = running.get(job_id)
            if job is None:
                continue
            target = min(asked, job.spec.max_size)  # no more than the job may hold
            if target <= job.size:
                del self.requested[job_id]
                continue
            running[job_id] = replace(job, feedback=MappingProxyType(
                {**job.feedback, REQUESTED: float(target)}))
        return replace(view, running=MappingProxyType(running))

    def close(self) -> None:
        """Close the site's connection (the node shell shares it)."""
        self.cluster.close()

    def drain_events(self) -> Sequence[JobEvent]:
        return self.cluster.drain_events()

    def start(self, spec: JobSpec, size: int) -> int:
        granted = self.cluster.start(spec, size)
        launch = self.programs(spec)
        slurm_id = self.cluster.slurm_id(spec.id)
        if granted and launch is not None and slurm_id is not None:
            self.jobs[spec.id] = MpiJob(self.cluster.ctl, self.shell, launch,
                                        self.cluster.resizer, slurm_id=slurm_id)
            self.specs[spec.id] = spec
        return granted

    def _running(self, job_id: str) -> MpiJob | None:
        job = self.jobs.get(job_id)
        if job is None:
            return None
        if not job.nodes:
            try:
                job.wait_started(self.start_timeout)
            except Exception as exc:  # a job that cannot start cannot be resized
                logger.warning("%s: MPI job %s not running: %s", self.name, job_id, exc)
                return None
        return job

    @property
    def _negotiations(self) -> Negotiations | None:
        return getattr(self.cluster, "negotiations", None)  # a stand-in cluster may lack it

    def _negotiating(self, job_id: str) -> bool:
        negotiations = self._negotiations
        return negotiations is not None and job_id in negotiations

    def offer_grow(self, job_id: str, offer: int) -> int:
        if Capability.EXPAND not in self.capabilities:
            return 0
        if job_id in self.jobs and self._negotiations is not None:
            return self._pending(job_id, "grow", offer, lambda: self._grow(job_id, offer))
        return self._grow(job_id, offer)

    def _pending(self, job_id: str, kind: str, amount: int, work: Callable[[], int]) -> int:
        """The program's answer in a worker of the cluster's negotiations: PENDING."""
        before = self.cluster.size_of(job_id)
        if before is None or self._negotiating(job_id):
            return 0
        sign = 1 if kind == "grow" else -1

        def run() -> tuple[int, str]:
            changed = work()
            after = before + sign * changed
            return after, "" if changed else self.errors.pop(job_id, "") or "not taken"

        return self.cluster.negotiate(job_id, kind, amount, run)

    def _grow(self, job_id: str, offer: int) -> int:
        job = self._running(job_id)
        if job is None:
            return self.cluster.offer_grow(job_id, offer) if job_id not in self.jobs else 0
        offer = self.specs[job_id].accepts(job.size, offer)  # its maximum, its size rule
        if offer <= 0:
            return 0
        change = job.grow(offer)
        self.cluster.invalidate()
        self.errors[job_id] = change.error
        if change.error:
            logger.warning("%s: growing %s: %s", self.name, job_id, change.error)
        if job_id in self.requested and job.size >= self.requested[job_id]:
            del self.requested[job_id]
        return max(0, change.delta)

    def request_shrink(self, job_id: str, amount: int, mandatory: bool) -> int:
        if Capability.SHRINK not in self.capabilities:
            return 0
        if job_id in self.jobs and self._negotiations is not None:
            return self._pending(job_id, "shrink", amount,
                                 lambda: self._shrink(job_id, amount, mandatory))
        return self._shrink(job_id, amount, mandatory)

    def _shrink(self, job_id: str, amount: int, mandatory: bool) -> int:
        job = self._running(job_id)
        if job is None:
            if job_id in self.jobs:
                return 0
            return self.cluster.request_shrink(job_id, amount, mandatory)
        amount = self.specs[job_id].releases(job.size, amount)  # its minimum, its size rule
        if amount <= 0:
            return 0
        change = job.shrink(amount, mandatory)
        self.cluster.invalidate()
        self.errors[job_id] = change.error
        if change.error:
            level = logging.ERROR if mandatory else logging.INFO
            logger.log(level, "%s: shrinking %s: %s", self.name, job_id, change.error)
        return max(0, -change.delta)

    def cancel(self, job_id: str) -> None:
        self.requested.pop(job_id, None)
        self.errors.pop(job_id, None)
        job = self.jobs.pop(job_id, None)
        self.specs.pop(job_id, None)
        if job is None:
            self.cluster.cancel(job_id)
            return
        left = job.cancel()
        self.cluster.invalidate()
        if left:
            logger.error("%s: processes left by %s: %s", self.name, job_id, left)

    def _started(self, job_id: str, job: MpiJob) -> bool:
        """Whether the job's processes run (one look, no waiting)."""
        try:
            return job.poll_started()
        except ExternalError as exc:
            logger.debug("%s: MPI job %s did not start: %s", self.name, job_id, exc)
            return False

    def _relay_requests(self) -> None:
        """The programs' own requests: shrink now, or keep a grow request for the policy."""
        for job_id, job in list(self.jobs.items()):
            if self._negotiating(job_id) or not self._started(job_id, job):
                continue
            if job.ended():
                self.requested.pop(job_id, None)  # a request ends with its job
                continue
            for request in job.requests():
                target = int(request.get("target", job.size))
                self.requested.pop(job_id, None)  # the latest request replaces the others
                if target < job.size:
                    logger.info("%s: %s asks to shrink to %d", self.name, job_id, target)
                    job.shrink(job.size - target)
                    self.cluster.invalidate()
                elif target > job.size:
                    logger.info("%s: %s asks to grow to %d", self.name, job_id, target)
                    self.requested[job_id] = target
