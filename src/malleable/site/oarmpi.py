"""An ``--mpi`` job on an OAR site of the site service: the OAR runner's job, driven through
the job's agent (docs/oar.md, "The site service on OAR").

The logic is the OAR runner's (:class:`~malleable.runner.oar.OarMpiJob`: extension jobs,
offers and answers through the file channel, release after the smaller set took over),
with two things done by the job's agent, as the job's user, instead of the runner's own
account:

* the **extension jobs**: submitted with the agent's ``extend`` and deleted with its
  ``release`` (:mod:`malleable.site.oaragent`); an extension the agent cannot release
  (its channel dropped) is deleted as ``oar`` (the service's sudo rule), never left;
* the **files** of the run directory (offers, answers, the nodes file) and the host name
  of a new node: the agent's ``read``, ``write`` and ``stage`` (:class:`OarRelayShell`;
  the run directory is in the user's shared home, so the agent reads it where it runs).

OAR's state of the base job and of the extensions comes from the service's own
``oarstat`` (anyone may read it).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass, field

from malleable.adapters.common import NoCommands
from malleable.adapters.oar.ctl import OarCtl
from malleable.errors import ExternalError
from malleable.runner.launch import Launch
from malleable.runner.oar import OarMpiJob
from malleable.site.channel import ChannelError, RelayShell, Session

logger = logging.getLogger(__name__)

#: What a call of a command an OAR job does not have says.
_NONE = "an OAR job ran a command of another kind of site"


@dataclass
class OarRelayShell(RelayShell):
    """The agent's relay on an OAR site: a node list is comma-separated (no ``scontrol``)."""

    def hostnames(self, node_list: str) -> list[str]:
        return [n for n in node_list.split(",") if n]


@dataclass
class AgentOarMpiJob(OarMpiJob):
    """:class:`~malleable.runner.oar.OarMpiJob` whose extension jobs the agent submits and
    deletes as the job's user (see the module docstring)."""

    session: Session | None = None
    submitted: list[int] = field(default_factory=list)
    """Every extension job the agent submitted for this job, in order."""
    deleted: list[int] = field(default_factory=list)
    """Those deleted since (declined by the program, late, or released by a shrink)."""

    def _agent(self) -> Session:
        if self.session is None or self.session.closed:
            raise ChannelError("the job's channel is not open")
        return self.session

    def _submit_extensions(self, base: int, count: int) -> list[int]:
        try:
            reply = self._agent().call("extend", count=count)
        except ChannelError as exc:
            raise ExternalError(f"extend through the job's agent: {exc}") from None
        ids = [int(i) for i in reply.get("ids", ())]
        self.submitted.extend(ids)
        return ids

    def _delete_extensions(self, ids: Sequence[int]) -> None:
        ids = list(ids)
        try:
            self._agent().call("release", ids=ids)
        except ChannelError as exc:  # they must not stay: deleted as oar
            logger.warning("job %s: the agent did not release %s (%s); deleting as oar",
                           self.native_id, ids, str(exc)[:200])
            self._ctl.delete(ids)
        self.deleted.extend(ids)


def agent_mpi_job(oar: OarCtl, session: Session, base: int, grow_wait: float
                  ) -> AgentOarMpiJob:
    """The runner's state of the ``--mpi`` job ``base`` over its agent's open ``session``
    (the program and run directory are those the agent announced)."""
    launch = Launch(session.program, "", workdir=os.path.dirname(session.run_dir))
    shell = OarRelayShell(NoCommands(_NONE), oar.timeout, session=session)
    return AgentOarMpiJob.make(shell, launch, oar=oar, answer_timeout=60.0,
                               done_timeout=120.0, grow_wait=grow_wait, native_id=base,
                               seq=session.seq, session=session)
