"""What the site service needs of a site beyond the ``ResourceManager`` port, in neutral
terms: the tagged user jobs a poll found (:class:`Found`, their service ids), and the narrow
protocol the service drives each site through (:class:`ServiceSite`: adopt, cancel a copy,
the owner of a job, forget ended jobs, the counters). The Slurm and OAR sites
(:class:`~malleable.site.adapter.SiteSlurm`, :class:`~malleable.site.oarsite.SiteOar`)
implement it; the service (:mod:`malleable.site.daemon`) knows only this."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from malleable.adapters.outcomes import ResizeResult
from malleable.adapters.shell import CommandRunner
from malleable.model import ClusterView, JobKind, JobSpec
from malleable.resources import ResourceManager
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
