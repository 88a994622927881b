"""What the site service needs of a site beyond the ``ResourceManager`` port, in neutral
terms: the tagged user jobs a poll found (:class:`Found`, their service ids), and the narrow
protocol the service drives each site through (:class:`ServiceSite`: adopt, cancel a copy,
the owner of a job, forget ended jobs, the counters). The Slurm and OAR sites
(:class:`~malleable.site.adapter.SiteSlurm`, :class:`~malleable.site.oarsite.SiteOar`)
implement it by wrapping their cluster adapter (:class:`WrappedSite`); the service
(:mod:`malleable.site.daemon`) knows only this."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Generic, Protocol, TypeVar

from malleable.adapters.outcomes import ResizeResult
from malleable.adapters.shell import CommandRunner
from malleable.model import ClusterView, JobKind, JobSpec
from malleable.resources import Capability, JobEvent, ResourceManager
from malleable.site import tag as tags
from malleable.site.channel import ChannelServer


@dataclass(frozen=True, slots=True)
class Found:
    """A tagged user job seen in this poll (``native_id``: the site's own id of it)."""

    job_id: str
    """The service's id of the job: ``USER:SUB`` (``USER:SITE.NATIVEID`` without ``sub``)."""
    site: str
    native_id: int
    user: str
    tag: tags.UserTag
    nodes: int
    running: bool
    held: bool

    @property
    def slurm_id(self) -> int:
        """The former name of :attr:`native_id` (when every site was a Slurm site)."""
        return self.native_id

    def spec(self, now: float) -> JobSpec:
        """The job for the manager's queue (its initial size: the site's node count)."""
        initial = min(max(self.nodes, self.tag.min_size), self.tag.max_size)
        return JobSpec(self.job_id, JobKind.MALLEABLE, self.tag.min_size, self.tag.max_size,
                       initial, submit_time=max(0.0, now), app=self.tag.app,
                       preferred_size=self.tag.preferred, user=self.user)


def service_id(user: str, site: str, native_id: int, sub: str | None) -> str:
    """The service's id of a user job (copies of one submission share it)."""
    return f"{user}:{sub}" if sub else f"{user}:{site}.{native_id}"


class Counters:
    """What the service counts of a site each cycle, written once for every kind (mixed
    into :class:`~malleable.site.adapter.SiteSlurm` and
    :class:`~malleable.site.oarsite.SiteOar`, which hold the two fields)."""

    placements: int
    """Held copies released since the service last counted them."""
    resizes: list[ResizeResult]

    def take_placements(self) -> int:
        """Held copies released since the last call (the count starts again from 0)."""
        count, self.placements = self.placements, 0
        return count

    def trim_resizes(self, keep: int) -> None:
        """Forget all but the ``keep`` most recent resize results (the journal has them)."""
        if len(self.resizes) > keep:
            del self.resizes[:-keep]


class Wrapped(Protocol):
    """What a service site delegates to the cluster adapter it wraps (Slurm's or OAR's)."""

    name: str
    capabilities: frozenset[Capability]
    reserve: int
    last_view: ClusterView | None
    node_failures: list[dict[str, object]]

    def refresh(self) -> None: ...

    def observe(self) -> ClusterView: ...

    def drain_events(self) -> Sequence[JobEvent]: ...

    def cancel(self, job_id: str) -> None: ...

    def close(self) -> None: ...

    def invalidate(self) -> None: ...

    def abandon(self, job_ids: Iterable[str]) -> None: ...

    def adopt(self, spec: JobSpec, native_id: int | None, *, requested: int = 0,
              started: bool = False, size: int = 0, since: float | None = None) -> None: ...

    def native_id(self, job_id: str) -> int | None: ...

    def restore_node_failures(self, entries: Sequence[Mapping[str, object]]) -> None: ...


C = TypeVar("C", bound=Wrapped)


@dataclass
class WrappedSite(Counters, Generic[C]):
    """A service site that holds its cluster adapter (:attr:`cluster`) and delegates the
    ``ResourceManager`` port and the restart verbs to it, with what every kind keeps of
    its users' tagged jobs; written once (the Slurm and OAR sites add the rest)."""

    cluster: C
    """The cluster adapter this site drives (its poll, events, resizes)."""
    account: str = ""
    """The service's own user on the site (its jobs are not users')."""
    found: dict[int, Found] = field(default_factory=dict)
    """Tagged user jobs of the last poll, by native id."""
    ignored: dict[int, str] = field(default_factory=dict)
    """Jobs whose tag was refused (logged once), with the reason."""
    placements: int = 0
    """Held copies started since the service last counted them."""
    channel: ChannelServer | None = None
    """The application channel: the jobs' agents (None: no job is resized through it)."""

    @property
    def name(self) -> str:
        return self.cluster.name

    @name.setter
    def name(self, value: str) -> None:
        self.cluster.name = value

    @property
    def capabilities(self) -> frozenset[Capability]:
        """The adapter's declared capabilities."""
        return self.cluster.capabilities

    @capabilities.setter
    def capabilities(self, value: frozenset[Capability]) -> None:
        self.cluster.capabilities = value

    @property
    def reserve(self) -> int:
        return self.cluster.reserve

    @reserve.setter
    def reserve(self, value: int) -> None:
        self.cluster.reserve = value

    @property
    def last_view(self) -> ClusterView | None:
        return self.cluster.last_view

    @property
    def node_failures(self) -> list[dict[str, object]]:
        return self.cluster.node_failures

    def refresh(self) -> None:
        """Take one observation now (the adapter's poll, which calls this site's hooks)."""
        self.cluster.refresh()

    def observe(self) -> ClusterView:
        return self.cluster.observe()

    def drain_events(self) -> Sequence[JobEvent]:
        return self.cluster.drain_events()

    def cancel(self, job_id: str) -> None:
        self.cluster.cancel(job_id)

    def close(self) -> None:
        self.cluster.close()

    def invalidate(self) -> None:
        self.cluster.invalidate()

    def abandon(self, job_ids: Iterable[str]) -> None:
        self.cluster.abandon(job_ids)

    def adopt(self, spec: JobSpec, native_id: int | None, *, requested: int = 0,
              started: bool = False, size: int = 0, since: float | None = None) -> None:
        self.cluster.adopt(spec, native_id, requested=requested, started=started, size=size,
                           since=since)

    def native_id(self, job_id: str) -> int | None:
        return self.cluster.native_id(job_id)

    def restore_node_failures(self, entries: Sequence[Mapping[str, object]]) -> None:
        self.cluster.restore_node_failures(entries)


class Commands(Protocol):
    """A site's commands, as far as the service reaches them (its runner: ``unmunge``)."""

    @property
    def runner(self) -> CommandRunner: ...


class ServiceSite(ResourceManager, Protocol):
    """One site of the service, as the service drives it (besides ``ResourceManager``)."""

    @property
    def kind(self) -> str: ...

    @property
    def id_key(self) -> str:
        """How log lines and ``manager status`` name a job's id there (``slurm_id``...)."""
        ...

    @property
    def ctl(self) -> Commands: ...

    @property
    def last_view(self) -> ClusterView | None: ...

    reserve: int
    channel: ChannelServer | None

    @property
    def found(self) -> Mapping[int, Found]:
        """The tagged user jobs of the last poll, by native id."""
        ...

    @property
    def ignored(self) -> Mapping[int, str]:
        """Jobs whose tag was refused (logged once), with the reason."""
        ...

    @property
    def resizes(self) -> list[ResizeResult]: ...

    def native_id(self, job_id: str, /) -> int | None: ...

    def adopt(self, spec: JobSpec, native_id: int | None, /, *, requested: int = 0) -> None: ...

    def cancel_copy(self, native_id: int, /) -> None: ...

    def owner(self, native_id: int, /) -> tuple[str, bool] | None: ...

    def forget(self, job_ids: set[str], /) -> None: ...

    def take_placements(self) -> int: ...

    def trim_resizes(self, keep: int, /) -> None: ...

    def close(self) -> None: ...
