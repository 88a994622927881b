"""The agent's OAR requests: extension jobs of its own job, submitted and deleted as the user.

On an OAR site (docs/oar.md, "The site service on OAR") a malleable job grows by
single-node *extension* jobs that hold their node while the base job lives, as the OAR
adapter's do; they must belong to the job's user (on a real site a user reaches only the
nodes of their own jobs), so the job's agent, running as the user inside the base job,
submits and deletes them for the service:

``extend``   ``{"count": N}``: ``oarsub --array N`` of one-node jobs named
             :func:`extension_name` (``malleable+BASE``), wall time that of the base job,
             each holding its node while the base job lives; the reply ``{"ids": [...]}``.
``release``  ``{"ids": [...]}``: ``oardel`` of those jobs, each of which must be one of the
             base job's extensions (its name says so, and its owner is this user); any
             other id refuses the whole request and nothing is deleted.

The agent also keeps the job's size where the user's command reads it (the run
directory, ``$MALLEABLE_RUN_DIR``): ``nodes`` (one host name per line) and ``size`` (the
node count), written at start from ``$OAR_NODEFILE`` and by the service (the agent's
``write``) after each grow or shrink.
"""

from __future__ import annotations

import getpass
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from malleable.adapters.oar.ctl import OarCtl
from malleable.adapters.oar.payload import OarPayload, hms
from malleable.adapters.shell import LocalRunner
from malleable.errors import ExternalError
from malleable.runner.private import make_private

#: What an extension job's name starts with; the base job's OAR id follows.
EXTENSION_PREFIX = "malleable+"
#: Most extension jobs one ``extend`` may submit.
MAX_EXTEND = 1000
#: Seconds per OAR command of the agent: under the service's 60 s per request
#: (:class:`~malleable.site.channel.Session`), so that a slow ``oarsub`` is answered as an
#: error rather than left behind by the service (extensions OAR accepted anyway are found
#: by name at the service's next poll).
COMMAND_TIMEOUT = 45.0


def extension_name(base: int) -> str:
    """The OAR name of the extension jobs of base job ``base``."""
    return f"{EXTENSION_PREFIX}{base}"


def walltime_text(seconds: float | None) -> str:
    """OAR's ``H:MM:SS`` for the base job's wall time (two hours when it is not known)."""
    return hms(int(seconds) if seconds else 7200)


def size_text(nodes: Sequence[str]) -> tuple[str, str]:
    """The ``nodes`` and ``size`` files' contents for a job on ``nodes``."""
    return "".join(f"{n}\n" for n in nodes), f"{len(nodes)}\n"


@dataclass
class OarOps:
    """``extend`` and ``release`` for base job ``base`` (see the module docstring)."""

    base: int
    ctl: OarCtl = field(default_factory=lambda: OarCtl(LocalRunner(), timeout=COMMAND_TIMEOUT))
    user: str = field(default_factory=getpass.getuser)

    def handle(self, op: object, request: dict[str, Any]) -> dict[str, Any] | None:
        """The reply to an OAR request (an OAR command that failed or overran is an error
        reply, never the agent's end); None when ``op`` is not one."""
        try:
            if op == "extend":
                return {"ids": self.extend(request.get("count"))}
            if op == "release":
                return {"ids": self.release(request.get("ids"))}
        except ExternalError as exc:
            return {"error": f"{type(exc).__name__}: {str(exc)[:300]}"}
        return None

    def extend(self, count: object) -> list[int]:
        if not isinstance(count, int) or isinstance(count, bool) or not \
                0 < count <= MAX_EXTEND:
            raise ValueError(f"extend: count must be an integer in 1..{MAX_EXTEND}, "
                             f"not {count!r}")
        (base,) = self.ctl.jobs([self.base]) or (None,)
        if base is None or base.state.finished:
            raise ValueError(f"extend: the base job {self.base} is not running")
        options = ["-n", extension_name(self.base), "-l",
                   f"nodes=1,walltime={walltime_text(base.walltime)}"]
        return self.ctl.submit(options, OarPayload.extension(self.base), count)

    def release(self, ids: object) -> list[int]:
        if not isinstance(ids, list) or not ids or not all(
                isinstance(i, int) and not isinstance(i, bool) and i > 0 for i in ids):
            raise ValueError(f"release: ids must be a list of OAR job ids, not {ids!r}")
        found = {j.job_id: j for j in self.ctl.jobs(ids)}
        name = extension_name(self.base)
        foreign = [i for i in ids if i not in found or found[i].name != name
                   or found[i].owner != self.user]
        if foreign:
            raise ValueError(f"release: {' '.join(map(str, foreign))} not extension jobs of "
                             f"job {self.base}: refused")
        result = self.ctl.delete(ids)
        if result.rc != 0:
            raise OSError(f"oardel: {(result.stdout + result.stderr).strip()[:200]}")
        return list(ids)


def own_nodes(nodefile: str | None = None) -> list[str]:
    """The base job's nodes (``$OAR_NODEFILE``: one line per core; each node once, in order)."""
    path = nodefile or os.environ.get("OAR_NODEFILE", "")
    try:
        with open(path) as f:
            lines = [line.strip() for line in f if line.strip()]
    except OSError:
        return []
    return list(dict.fromkeys(lines))


def write_atomic(path: Path, text: str) -> None:
    """Write ``path`` under a temporary name, then rename (a reader never sees half)."""
    tmp = path.with_name(f"{path.name}.tmp.{os.getpid()}")
    tmp.write_text(text)
    tmp.replace(path)


def start_files(run_dir: str, nodefile: str | None = None) -> list[str]:
    """Make the run directory (private: :func:`~malleable.runner.private.make_private`,
    :class:`~malleable.runner.private.NotPrivate` otherwise) and write its ``nodes`` and
    ``size`` files from the base job's own nodes (before the service has said anything);
    the nodes."""
    nodes = own_nodes(nodefile)
    folder = Path(make_private(run_dir))
    listing, size = size_text(nodes)
    write_atomic(folder / "nodes", listing)
    write_atomic(folder / "size", size)
    return nodes
