"""OAR's commands on one site, as argv lists run through a :class:`CommandRunner`.

Thin: each method builds one argv, runs it with the site's timeout and parses the
answer with :mod:`malleable.adapters.oar.parse`. No state besides the runner. Scripts
given to ``sh -c`` are constants; every value goes in as a positional argument.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass

from malleable.adapters.oar.parse import OarJob, OarNode, ParseError, parse_oarnodes, parse_oarstat
from malleable.adapters.shell import CommandRunner, Result
from malleable.errors import ExternalError

logger = logging.getLogger(__name__)

_SEPARATOR = "@@malleable:oarstat@@"
#: Nodes and jobs in one remote call. Nodes first: a job that ends between the two reads
#: then shows as ended with its nodes still busy, never as running on idle nodes.
_POLL = ["sh", "-c", f"oarnodes -J && echo {_SEPARATOR} && oarstat -J"]
#: Write stdin to a file of the user's (shared) home, creating its directory.
_WRITE = ["sh", "-c", 'mkdir -p "$(dirname "$1")" && cat > "$1"', "write"]
#: Make a directory of the user's (shared) home, and its parents.
_MKDIR = ["mkdir", "-p", "--"]


@dataclass(frozen=True, slots=True)
class Poll:
    """One observation of a site: every job oarstat lists (not ended), and every node."""

    jobs: tuple[OarJob, ...]
    nodes: tuple[OarNode, ...]


class OarCtl:
    """The OAR client commands of one site.

    With ``sudo_to`` (the site service: ``"oar"``), ``oarresume`` and ``oardel`` run as that
    user through ``sudo -n -u USER`` (the one sudo rule of docs/oar.md): OAR lets only a
    job's owner, ``oar`` or ``root`` resume or delete it."""

    def __init__(self, runner: CommandRunner, timeout: float = 30.0,
                 sudo_to: str | None = None) -> None:
        self.runner = runner
        self.timeout = timeout
        self.sudo_to = sudo_to

    def via_sudo(self, user: str) -> OarCtl:
        """The same commands, with ``oarresume`` and ``oardel`` run as ``user`` by sudo."""
        return OarCtl(self.runner, self.timeout, sudo_to=user)

    def _privileged(self, argv: list[str]) -> list[str]:
        return ["sudo", "-n", "-u", self.sudo_to, *argv] if self.sudo_to else argv

    def _run(self, argv: Sequence[str], *, check: bool = True, input: str | None = None,
             timeout: float | None = None) -> Result:
        return self.runner.run(argv, timeout or self.timeout, check=check, input=input)

    def poll(self) -> Poll:
        """Nodes and jobs in one call (``oarnodes -J`` then ``oarstat -J``)."""
        out = self._run(_POLL).stdout
        nodes, sep, jobs = out.partition(_SEPARATOR)
        if not sep:
            raise ExternalError("oar poll: the output lacks the oarstat part")
        try:
            return Poll(tuple(parse_oarstat(jobs)), tuple(parse_oarnodes(nodes)))
        except ParseError as exc:
            raise ExternalError(f"oar poll: {exc}") from None

    def jobs(self, job_ids: Sequence[int]) -> list[OarJob]:
        """Jobs by id with their events, ended ones included (``oarstat -fJ -j ID ...``)."""
        if not job_ids:
            return []
        argv = ["oarstat", "-fJ", *(a for j in job_ids for a in ("-j", str(j)))]
        try:
            return parse_oarstat(self._run(argv).stdout)
        except ParseError as exc:
            raise ExternalError(f"oarstat: {exc}") from None

    def submit(self, options: Sequence[str], command: str, count: int = 1) -> list[int]:
        """``oarsub -J OPTIONS COMMAND``; with ``count`` > 1 one array submission
        (``--array COUNT``: that many independent jobs in one call). The job ids;
        ExternalError when OAR accepted none."""
        array = ["--array", str(count)] if count > 1 else []
        result = self._run(["oarsub", "-J", *array, *options, command], check=False)
        ids = _submitted_ids(result.stdout)
        if not ids:
            raise ExternalError(f"oarsub refused the job: {_reason(result)}")
        if len(ids) < count:
            logger.warning("oarsub accepted %d of %d jobs: %s", len(ids), count, _reason(result))
        return ids

    def delete(self, job_ids: Sequence[int]) -> Result:
        """``oardel ID ...`` (unchecked: a job that already ended is not an error here)."""
        return self._run(self._privileged(["oardel", *(str(j) for j in job_ids)]), check=False)

    def resume(self, job_id: int) -> Result:
        """``oarresume ID``: a held job may be scheduled (unchecked: the caller reads rc)."""
        return self._run(self._privileged(["oarresume", str(job_id)]), check=False)

    def write(self, path: str, text: str) -> None:
        """Write ``text`` to ``path`` on the site (its /home is shared by its nodes)."""
        self._run([*_WRITE, path], input=text)

    def mkdir(self, path: str) -> None:
        """Make the directory ``path`` (and its parents) on the site: OAR refuses to start
        a job whose ``-O``/``-E`` files it cannot create (``OUTPUT_FILES`` event)."""
        self._run([*_MKDIR, path])


def _submitted_ids(text: str) -> list[int]:
    """Every positive ``job_id`` of the JSON objects in concatenated ``oarsub -J`` outputs."""
    decoder = json.JSONDecoder()
    ids, pos = [], text.find("{")
    while pos >= 0:
        try:
            doc, end = decoder.raw_decode(text, pos)
        except json.JSONDecodeError:
            end = pos + 1
        else:
            job_id = doc.get("job_id") if isinstance(doc, dict) else None
            if isinstance(job_id, int) and job_id > 0:
                ids.append(job_id)
        pos = text.find("{", end)
    return ids


def _reason(result: Result) -> str:
    lines = [line.strip() for line in (result.stdout + "\n" + result.stderr).splitlines()]
    useful = [line for line in lines if "error" in line.lower() or "not enough" in line.lower()]
    return "; ".join(useful) or f"exit code {result.rc}"
