"""A fake Slurm site for the tests: a CommandRunner that answers the adapter's argv in
Slurm 22.05's formats (the JSON shapes of the recorded output in tests/data/slurm/).

It models what the adapter relies on: whole-node allocation, sbatch/salloc/scancel,
``scontrol update NumNodes`` (shrink, ``0`` on a helper, ``ALL`` on the expanded job),
``scontrol update NodeList`` (a running job keeps exactly those of its nodes; the node list
must be a subset of its nodes), ``scontrol -o show job``, ``squeue --json``/``sinfo --json``
in one call, and ``sacct``.
``refuse`` makes the next matching update fail with a given message; nodes in ``dead``
show as not responding.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from malleable.adapters.shell import CommandError, Result

DATA = Path(__file__).resolve().parents[1] / "data" / "slurm"
_TEMPLATE_JOB = json.loads((DATA / "squeue_after_resizes.json").read_text())["jobs"][1]
_TEMPLATE_NODE = json.loads((DATA / "sinfo_4_idle.json").read_text())["nodes"][0]


@dataclass
class FakeJob:
    job_id: int
    name: str
    comment: str
    want: int
    state: str = "PENDING"
    nodes: list[str] = field(default_factory=list)
    submit: int = 0
    start: int = 0
    end: int = 0
    expand_of: int | None = None
    given: list[str] = field(default_factory=list)
    user: str = "malleable"
    held: bool = False
    admin_hold: bool = False
    """Held by an administrator (``scontrol hold`` as root: ``Reason=JobHeldAdmin``)."""

    @property
    def reason(self) -> str:
        return "JobHeldAdmin" if self.admin_hold else "JobHeldUser" if self.held else "None"


@dataclass
class FakeSlurm:
    node_names: list[str]
    now: int = 1_800_000_000
    jobs: dict[int, FakeJob] = field(default_factory=dict)
    calls: list[list[str]] = field(default_factory=list)
    scripts: dict[int, str] = field(default_factory=dict)
    refuse: dict[str, str] = field(default_factory=dict)
    purged: set[int] = field(default_factory=set)
    accounting: bool = True
    admin_levels: dict[str, str] = field(default_factory=dict)
    dead: set[str] = field(default_factory=set)
    refused: dict[int, str] = field(default_factory=dict)
    """Helper allocations salloc gave up on (cancelled while pending), with their reason."""
    stuck: set[str] = field(default_factory=set)
    """Nodes sinfo shows idle that the scheduler never gives (Slurm 22.05's select/linear
    after a hand-over, docs/slurm.md)."""
    _next: int = 100

    # ------------------------------------------------------------ CommandRunner

    def run(self, argv: Sequence[str], timeout: float, *, input: str | None = None,
            check: bool = True) -> Result:
        args = list(argv)
        self.calls.append(args)
        result = self._dispatch(args, input)
        if check and result.rc != 0:
            raise CommandError(args, result.rc, result.stdout, result.stderr)
        return result

    def close(self) -> None:
        pass

    # ------------------------------------------------------------ the site

    def free(self) -> list[str]:
        used = {n for j in self.jobs.values() if j.state == "RUNNING" for n in j.nodes}
        return [n for n in self.node_names if n not in used and n not in self.stuck]

    def add_job(self, nodes: int, comment: str = "", name: str = "bg", user: str = "malleable",
                held: bool = False) -> FakeJob:
        """A job submitted by ``user`` (held: waits until ``scontrol release``)."""
        job = self._new(name, comment, nodes)
        job.user, job.held = user, held
        self._schedule()
        return job

    def finish(self, job_id: int, state: str = "COMPLETED") -> None:
        job = self.jobs[job_id]
        job.state, job.end = state, self.now
        self._schedule()

    def _new(self, name: str, comment: str, want: int) -> FakeJob:
        self._next += 1
        job = FakeJob(self._next, name, comment, want, submit=self.now)
        self.jobs[job.job_id] = job
        return job

    def _schedule(self) -> None:
        for job in self.jobs.values():
            free = self.free()
            if job.state == "PENDING" and not job.held and len(free) >= job.want:
                job.state, job.start, job.nodes = "RUNNING", self.now, free[:job.want]

    # ------------------------------------------------------------ commands

    def _dispatch(self, args: list[str], input: str | None) -> Result:
        if args[:2] == ["sh", "-c"] and args[3:4] == ["handover"]:
            job = self.jobs.get(int(args[4]))
            if job is None or job.state != "RUNNING":
                return Result(64, "", f"job {args[4]} is no longer RUNNING\n")
            return self._update(int(args[5]), "0")
        if args[:2] == ["sh", "-c"]:
            return Result(0, self._sinfo() + "\n@@malleable:squeue@@\n" + self._squeue(), "")
        if args[:2] == ["squeue", "--json"]:  # as 22.05: every job, whatever --jobs says
            return Result(0, self._squeue(), "")
        if args[:4] == ["scontrol", "-o", "show", "job"] and int(args[4]) in self.refused:
            return Result(0, f"JobId={args[4]} JobName=m.helper JobState=CANCELLED "
                             f"Reason={self.refused[int(args[4])]} NumNodes=1\n", "")
        if args[:4] == ["scontrol", "-o", "show", "job"]:
            job = self.jobs.get(int(args[4]))
            if job is None or job.job_id in self.purged:
                return Result(1, "", "slurm_load_jobs error: Invalid job id specified\n")
            return Result(0, self._line(job) + "\n", "")
        if args[:2] == ["scontrol", "release"]:
            job = self.jobs.get(int(args[2]))
            if job is None or job.state != "PENDING":
                return Result(1, "", "Job is no longer pending execution\n")
            job.held = job.admin_hold = False
            self._schedule()
            return Result(0, "", "")
        if args[:2] == ["scontrol", "update"] and args[3].startswith("NodeList="):
            return self._keep(int(args[2].split("=")[1]), args[3].split("=")[1].split(","))
        if args[:2] == ["scontrol", "update"]:
            return self._update(int(args[2].split("=")[1]), args[3].split("=")[1])
        if args[0] == "sbatch":
            return self._sbatch(args, input or "")
        if args[0] == "salloc":
            return self._salloc(args)
        if args[0] == "scancel":
            job = self.jobs.get(int(args[1]))
            if job is None:
                return Result(1, "", "scancel: error: Invalid job id specified\n")
            if job.state in ("RUNNING", "PENDING"):
                self.finish(job.job_id, "CANCELLED")
            return Result(0, "", "")
        if args[:3] == ["env", "SLURM_TIME_FORMAT=%s", "sacct"]:
            key, _, value = args[-1].partition("=")
            if key == "--name":
                named = {j.job_id for j in self.jobs.values() if j.name in value.split(",")}
                return Result(0, self._sacct(",".join(str(i) for i in sorted(named))), "")
            return Result(0, self._sacct(value), "")
        if args[0] == "rm":
            return Result(0, "", "")
        if args[0] == "sacctmgr":
            return Result(0, self.admin_levels.get(args[5], "None") + "\n", "")
        return Result(127, "", f"fake slurm: unknown command {args}")

    def _option(self, args: list[str], name: str) -> str:
        for arg in args:
            if arg.startswith(f"--{name}="):
                return arg.split("=", 1)[1]
        return ""

    def _sbatch(self, args: list[str], script: str) -> Result:
        job = self._new(self._option(args, "job-name"), self._option(args, "comment"),
                        int(self._option(args, "nodes")))
        self.scripts[job.job_id] = script
        self._schedule()
        return Result(0, f"{job.job_id}\n", "")

    def _salloc(self, args: list[str]) -> Result:
        want = int(self._option(args, "nodes"))
        target = int(self._option(args, "dependency").split(":")[1])
        if len(self.free()) < want:
            self._next += 1
            self.refused[self._next] = "Resources"
            recorded = (DATA / "salloc_refused_busy.stderr").read_text()
            return Result(1, "", recorded.replace("6", str(self._next)))
        job = self._new(self._option(args, "job-name"), self._option(args, "comment"), want)
        job.expand_of = target
        self._schedule()
        return Result(0, "", f"salloc: Granted job allocation {job.job_id}\n")

    def _update(self, job_id: int, value: str) -> Result:
        message = self.refuse.pop(value, None)
        if message is not None:
            return Result(1, "", f"{message}\n")
        job = self.jobs[job_id]
        if job.state == "PENDING" and value.isdigit():
            job.want = int(value)
            self._schedule()
            return Result(0, "", "")
        if value == "0":
            if job.expand_of is None:
                return Result(1, "", "slurm_update error: Invalid node count specified\n")
            self.jobs[job.expand_of].given += job.nodes
            job.nodes, job.state, job.end = [], "COMPLETED", self.now
        elif value == "ALL":
            job.nodes, job.given = job.nodes + job.given, []
        else:
            n = int(value)
            if n > len(job.nodes):
                return Result(1, "", "slurm_update error: Requested operation not supported "
                                     "on this system\n")
            job.nodes = job.nodes[:n]
        self._schedule()
        return Result(0, "", "")

    def _keep(self, job_id: int, keep: list[str]) -> Result:
        job = self.jobs[job_id]
        if job.state != "RUNNING" or not keep or not set(keep) <= set(job.nodes):
            return Result(1, "", "slurm_update error: Invalid node name specified\n")
        job.nodes = [n for n in job.nodes if n in keep]
        self._schedule()
        return Result(0, "", "")

    # ------------------------------------------------------------ output

    def _squeue(self) -> str:
        jobs = []
        for job in self.jobs.values():
            if job.job_id in self.purged:
                continue
            raw = dict(_TEMPLATE_JOB)
            raw.update(job_id=job.job_id, name=job.name, comment=job.comment,
                       job_state=job.state, node_count=len(job.nodes) or job.want,
                       nodes=_hostlist(job.nodes), submit_time=job.submit,
                       start_time=job.start, end_time=job.end, user_name=job.user,
                       state_reason=job.reason,
                       batch_host=job.nodes[0] if job.nodes else "")
            jobs.append(raw)
        return json.dumps({"meta": {}, "errors": [], "jobs": jobs})

    def _sinfo(self) -> str:
        busy = {n for j in self.jobs.values() if j.state == "RUNNING" for n in j.nodes}
        nodes = []
        for name in self.node_names:
            raw = dict(_TEMPLATE_NODE)
            raw.update(name=name, state="allocated" if name in busy else "idle",
                       state_flags=["NOT_RESPONDING"] if name in self.dead else [])
            nodes.append(raw)
        return json.dumps({"meta": {}, "errors": [], "nodes": nodes})

    def _line(self, job: FakeJob) -> str:
        count = len(job.nodes) or job.want
        return (f"JobId={job.job_id} JobName={job.name} UserId={job.user}(2000) "
                f"JobState={job.state} Reason={job.reason} "
                f"NodeList={_hostlist(job.nodes) or '(null)'} "
                f"BatchHost={job.nodes[0] if job.nodes else '(null)'} "
                f"NumNodes={count} NumCPUs={count} Comment={job.comment or '(null)'} "
                f"TRES=cpu={count},node={count} Power=")

    def _sacct(self, ids: str) -> str:
        lines = ["JobID|JobName|State|NNodes|Start|End"]
        if self.accounting:
            for job_id in (int(i) for i in ids.split(",") if i):
                job = self.jobs.get(job_id)
                if job is not None:
                    lines.append(f"{job.job_id}|{job.name}|{job.state}|{len(job.nodes)}|"
                                 f"{job.start}|{job.end}")
        return "\n".join(lines) + "\n"


def _hostlist(nodes: list[str]) -> str:
    return ",".join(nodes)


def node_names(count: int) -> list[str]:
    return [f"n{i:03d}" for i in range(1, count + 1)]


def job_number(line: str) -> int:
    found = re.search(r"JobId=(\d+)", line)
    return int(found.group(1)) if found else -1


def settle(adapters: Iterable[object], timeout: float = 30.0) -> list[str]:
    """Wait for the negotiations the adapters run in workers (pending answers) to end, so a
    test on this fake sees the same order whatever the machine's load; the job ids of
    those still running after ``timeout`` seconds."""
    left: list[str] = []
    for adapter in adapters:
        negotiations = getattr(adapter, "negotiations", None)
        if negotiations is not None:
            left += negotiations.wait(timeout)
    return left
