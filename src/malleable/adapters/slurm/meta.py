"""The malleable metadata a job carries in Slurm (its comment), so that the adapter can
tell its own jobs from background load, even after a restart.

The comment is compact JSON without spaces (``scontrol -o`` splits on spaces)::

    {"malleable":1,"run":"3f2a","job":"wm-7"}            a managed job
    {"malleable":1,"run":"3f2a","helper_for":1234}       a helper allocation of an expansion
"""

from __future__ import annotations

import json
from dataclasses import dataclass

VERSION = 1


@dataclass(frozen=True, slots=True)
class Tag:
    """What a comment says: the manager run, and the job id or the job being expanded."""

    run: str
    job: str | None = None
    helper_for: int | None = None


def encode(tag: Tag) -> str:
    body: dict[str, object] = {"malleable": VERSION, "run": tag.run}
    if tag.job is not None:
        body["job"] = tag.job
    if tag.helper_for is not None:
        body["helper_for"] = tag.helper_for
    return json.dumps(body, separators=(",", ":")).replace(" ", "\\u0020")


def decode(comment: str) -> Tag | None:
    """The tag in a Slurm comment, or None for anything else (background jobs)."""
    if not comment.startswith("{"):
        return None
    try:
        body = json.loads(comment)
    except json.JSONDecodeError:
        return None
    if not isinstance(body, dict) or body.get("malleable") != VERSION:
        return None
    run, job, helper = body.get("run"), body.get("job"), body.get("helper_for")
    if not isinstance(run, str):
        return None
    return Tag(run, job if isinstance(job, str) else None,
               helper if isinstance(helper, int) and not isinstance(helper, bool) else None)


def job_name(job_id: str, run: str = "") -> str:
    """A readable Slurm job name for a managed job (squeue's NAME column): ``m.RUN.JOB``,
    so that ``sacct --name`` finds a run's copies of a job (and no other run's)."""
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in job_id)
    return (f"m.{run}.{safe}" if run else f"m.{safe}")[:64]
