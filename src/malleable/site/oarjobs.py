"""Tagged users' jobs in an OAR site's poll: what the site service discovers there.

The OAR site's discovery, and only that (:class:`~malleable.site.oarsite.SiteOar` calls
it each poll): every job of ``oarstat -J``
whose name claims to be a compact tag (:func:`malleable.site.tag.looks_like_oar_tag`)
is parsed; its owner is oarstat's ``owner``, never anything the name says (the compact
form has no user key). The service's own jobs are skipped; a name that claims to be a
tag and is not a valid one is refused with the reason, for the service to log once.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from malleable.adapters.oar.parse import OarJob
from malleable.model import JobState
from malleable.site import tag as tags
from malleable.site.port import service_id


@dataclass(frozen=True, slots=True)
class OarTagged:
    """A tagged user job of an OAR site, waiting (held or not) or running."""

    job_id: str
    """The service's id (``USER:SUB``, or ``USER:SITE.OARID`` without a submission id)."""
    site: str
    oar_id: int
    user: str
    """oarstat's ``owner``."""
    tag: tags.UserTag
    state_raw: str
    nodes: tuple[str, ...] = ()

    @property
    def held(self) -> bool:
        """Submitted ``--hold``: waits for the service's ``oarresume``."""
        return self.state_raw == "Hold"


@dataclass(frozen=True, slots=True)
class Discovery:
    """One poll's tagged jobs by OAR id, and the refused ones with why."""

    found: dict[int, OarTagged]
    refused: dict[int, str]


def discover(jobs: Iterable[OarJob], site: str, account: str) -> Discovery:
    """The tagged user jobs among ``jobs`` (``account``'s own are not users' jobs)."""
    found: dict[int, OarTagged] = {}
    refused: dict[int, str] = {}
    for job in jobs:
        if job.owner == account or not tags.looks_like_oar_tag(job.name):
            continue
        if job.state not in (JobState.PENDING, JobState.RUNNING):
            continue
        if not job.owner:
            refused[job.job_id] = "OAR reports no owner"
            continue
        try:
            tag = tags.parse_oar(job.name)
        except tags.BadTag as exc:
            refused[job.job_id] = str(exc)
            continue
        found[job.job_id] = OarTagged(service_id(job.owner, site, job.job_id, tag.sub), site,
                                      job.job_id, job.owner, tag, job.state_raw, job.nodes)
    return Discovery(found, refused)
