"""A fake OAR site for the tests: a CommandRunner that answers the OAR adapter's argv in
OAR 2.5.9's JSON shapes (those recorded in tests/data/oar/).

It models what the adapter relies on: one resource per node, FCFS scheduling of waiting
jobs at every command, ``oarsub -J`` (refused beyond the platform), ``oardel`` (a running
job ends in Error with FRAG_JOB_REQUEST), ``oarnodes -J`` and ``oarstat -J`` in one call,
``oarstat -fJ -j ...`` (ended jobs too) and the script written into the shared home.
``start_delay`` keeps a job waiting for that many commands (OAR's scheduling latency).
``finishing`` keeps a deleted running job ``Finishing`` (listed by ``oarstat -J``, its
nodes held) for that many commands before it ends in Error, as OAR does for a while, and a
deleted held job ``Hold`` (its deletion requested) as long; deleting it again meanwhile
fails with OAR's "already killed" (seen on the testbed; the exit code 1 is the fake's).
A node in ``absent`` shows ``Absent`` (an administrator's drain: its jobs go on). A node
in ``dead`` shows ``Suspected`` (finaud found it down) and takes no new job; a running job
there is not ended by ``oardel`` (it gets FRAG_JOB_REQUEST and stays Running,
as OAR 2.5.9 did on the testbed while it could not reach the node).
A job whose ``-O``/``-E`` file lies in a directory nobody made (``mkdir -p``, or a file
written there; a relative file is in the submission directory, which exists) ends in Error
at its start with ``OUTPUT_FILES``, as OAR's bipbip does. ``oarsub --hold`` leaves the job
in ``Hold`` (never scheduled) until ``oarresume``; jobs belong to ``user`` (oarstat's
``owner``), the one the runner submits as. A name longer than OAR's ``jobs.job_name``
(100 characters) is refused with OAR's unhelpful message. ``oarresume`` and ``oardel`` of
another user's job are refused with OAR's messages (the exit code 1 is the fake's: it was
not recorded); ``sudo -n -u oar oarresume|oardel`` works for the users in ``sudoers`` (the
testbed's rule) and is refused as sudo refuses anything else.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field

from malleable.adapters.shell import CommandError, Result

_ENDED = ("Terminated", "Error")
#: What OAR writes with some events (``oarstat -fJ``'s ``description``).
_EVENT_TEXT = {"OUTPUT_FILES": "[bipbip 1] Cannot create .stdout and .stderr files in "
                               "/home/malleable on the node grid-n1"}


@dataclass
class FakeOarJob:
    job_id: int
    name: str
    want: int
    command: str
    state: str = "Waiting"
    nodes: list[str] = field(default_factory=list)
    submit: int = 0
    start: int = 0
    stop: int = 0
    events: list[str] = field(default_factory=list)
    exit_code: int | None = None
    wait: int = 0
    walltime: int = 7200
    outputs: tuple[str, ...] = ()
    owner: str = "malleable"
    fragged: bool = False
    """A held job whose deletion OAR has not carried out yet."""


@dataclass
class FakeOar:
    node_names: list[str]
    now: int = 1_800_000_000
    jobs: dict[int, FakeOarJob] = field(default_factory=dict)
    files: dict[str, str] = field(default_factory=dict)
    dirs: set[str] = field(default_factory=lambda: {"/home/malleable"})
    calls: list[list[str]] = field(default_factory=list)
    start_delay: int = 0
    finishing: int = 0
    dead: set[str] = field(default_factory=set)
    absent: set[str] = field(default_factory=set)
    user: str = "malleable"
    sudoers: set[str] = field(default_factory=lambda: {"malleable"})
    """Users whose ``sudo -n -u oar oarresume|oardel`` is allowed (the testbed's rule)."""
    _next: int = 1

    # ------------------------------------------------------------ CommandRunner

    def run(self, argv: Sequence[str], timeout: float, *, input: str | None = None,
            check: bool = True) -> Result:
        args = list(argv)
        self.calls.append(args)
        self._schedule()
        result = self._dispatch(args, input)
        if check and result.rc != 0:
            raise CommandError(args, result.rc, result.stdout, result.stderr)
        return result

    def close(self) -> None:
        return None

    # ------------------------------------------------------------ the site

    def free(self) -> list[str]:
        busy = {n for j in self.jobs.values() if j.state in ("Running", "Finishing")
                for n in j.nodes}
        return [n for n in self.node_names if n not in busy and n not in self.dead]

    def add_job(self, nodes: int, name: str = "bg", walltime: int = 7200) -> FakeOarJob:
        job = self._new(name, nodes, "sleep 1000")
        job.walltime = walltime
        self._schedule()
        return job

    def finish(self, job_id: int, exit_code: int = 0) -> None:
        job = self.jobs[job_id]
        job.state, job.stop, job.exit_code = "Terminated", self.now, exit_code

    def _new(self, name: str, want: int, command: str) -> FakeOarJob:
        job = FakeOarJob(self._next, name, want, command, submit=self.now,
                         wait=self.start_delay, owner=self.user)
        self.jobs[job.job_id] = job
        self._next += 1
        return job

    def _schedule(self) -> None:
        for job in self.jobs.values():
            if job.state == "Finishing" or job.fragged:
                job.wait -= 1
                if job.wait <= 0:
                    job.state, job.stop, job.fragged = "Error", self.now, False
        for job in sorted(self.jobs.values(), key=lambda j: j.job_id):
            if job.state != "Waiting":
                continue
            if job.wait > 0:
                job.wait -= 1
                continue
            free = self.free()
            if len(free) < job.want:
                return
            job.state, job.nodes, job.start = "Running", free[:job.want], self.now
            if any("/" in o and o.rpartition("/")[0] not in self.dirs for o in job.outputs):
                job.events += ["SWITCH_INTO_ERROR_STATE", "OUTPUT_FILES"]
                job.state, job.stop = "Error", self.now

    # ------------------------------------------------------------ commands

    def _dispatch(self, args: list[str], input: str | None) -> Result:
        if args[:3] == ["sudo", "-n", "-u"]:
            if (args[3:4] == ["oar"] and args[4:5] in (["oarresume"], ["oardel"])
                    and self.user in self.sudoers):
                return self._job_command(args[4:], as_oar=True)
            return Result(1, "", "sudo: a password is required\n")
        if args[0] in ("oarresume", "oardel"):
            return self._job_command(args, as_oar=self.user == "oar")
        if args[:2] == ["sh", "-c"] and "oarnodes -J" in args[2]:
            return Result(0, self._oarnodes() + "\n@@malleable:oarstat@@\n" + self._oarstat(
                [j for j in self.jobs.values() if j.state not in _ENDED], full=False), "")
        if args[:2] == ["sh", "-c"] and args[3:4] == ["write"]:
            self.files[args[4]] = input or ""
            self._mkdir(args[4].rpartition("/")[0])
            return Result(0, "", "")
        if args[:3] == ["mkdir", "-p", "--"]:
            self._mkdir(args[3])
            return Result(0, "", "")
        if args[:2] == ["oarsub", "-J"]:
            count = int(args[args.index("--array") + 1]) if "--array" in args else 1
            return self._oarsub(count, args[2:])
        if args[:2] == ["oarstat", "-fJ"]:
            ids = [int(a) for a in args[2:] if a != "-j"]
            return Result(0, self._oarstat([self.jobs[i] for i in ids if i in self.jobs],
                                           full=True), "")
        if args[:1] == ["cat"]:  # a shared file, read on the login host
            text = self.files.get(args[1])
            return Result(0, text, "") if text is not None else Result(
                1, "", f"cat: {args[1]}: No such file or directory")
        return Result(127, "", f"fake oar: unknown command {args!r}")

    def _job_command(self, args: list[str], as_oar: bool) -> Result:
        """``oarresume ID...`` or ``oardel ID...`` (only the owner's jobs, unless as oar)."""
        ids = [int(a) for a in args[1:]]
        theirs = [i for i in ids if i in self.jobs and self.jobs[i].owner != self.user]
        if theirs and not as_oar:
            what = ("Cannot resume {} : you are not the right user." if args[0] == "oarresume"
                    else "Cannot frag {} ; You are not the right user.")
            return Result(1, "".join(what.format(i) + "\n" for i in theirs), "")
        if args[0] == "oarresume":
            for job_id in ids:
                if self.jobs[job_id].state == "Hold":
                    self.jobs[job_id].state = "Waiting"
                    self.jobs[job_id].events.append("RESUME_JOB")
            self._schedule()
            return Result(0, "".join(f"[{i}] Resume request was sent to the OAR server.\n"
                                     for i in ids), "")
        killed = [i for i in ids if i in self.jobs and self.jobs[i].fragged]
        for job_id in ids:
            self._delete(job_id)
        if killed:
            return Result(1, "".join(f"Deleting the job = {i} ...ERROR.\nCannot frag {i} ; "
                                     "This job was already killed.\n" for i in killed), "")
        return Result(0, "", "")

    def _oarsub(self, count: int, args: list[str]) -> Result:
        name, resources = args[args.index("-n") + 1], args[args.index("-l") + 1]
        want = int(resources.split(",")[0].removeprefix("nodes="))
        hms = [int(x) for x in resources.split("walltime=")[1].split(":")] \
            if "walltime=" in resources else [2, 0, 0]
        if len(name) > 100:  # jobs.job_name is varchar(100): the insert fails (as recorded)
            return Result(8, "[ADMISSION RULE] Set default walltime to 7200.\nOAR_JOB_ID=\n\n"
                          "##########\n{\n   \"job_id\" : null\n}\n\n##########\n",
                          "[ERROR] Oarsub failed, please verify your request syntax.\n")
        out = []
        for _ in range(count):
            if want > len(self.node_names):
                out.append("OAR_JOB_ID=-5\n##########\n{\n   \"job_id\" : -5\n}\n##########\n"
                           "There are not enough resources for your request\n")
                return Result(8, "".join(out), "")
            job = self._new(name, want, args[-1])
            if "--hold" in args:
                job.state = "Hold"
            job.outputs = tuple(args[args.index(o) + 1].replace("%jobid%", str(job.job_id))
                                for o in ("-O", "-E") if o in args)
            job.walltime = hms[0] * 3600 + hms[1] * 60 + hms[2]
            out.append(f"[ADMISSION RULE] Modify resource description\nOAR_JOB_ID={job.job_id}\n"
                       f"\n##########\n{{\n   \"job_id\" : {job.job_id}\n}}\n\n##########\n")
        self._schedule()
        return Result(0, "".join(out), "")

    def _delete(self, job_id: int) -> None:
        job = self.jobs.get(job_id)
        if job is None or job.state in _ENDED or job.fragged:
            return
        job.events.append("FRAG_JOB_REQUEST")
        if job.state == "Hold" and self.finishing > 0:
            job.fragged, job.wait = True, self.finishing
            return
        if job.state == "Running" and self.dead & set(job.nodes):
            return  # oarexec cannot be reached: the job stays Running
        if job.state == "Running" and self.finishing > 0:
            job.state, job.wait = "Finishing", self.finishing
            return
        job.state, job.stop = "Error", self.now

    def _mkdir(self, path: str) -> None:
        while path and path not in self.dirs:
            self.dirs.add(path)
            path = path.rpartition("/")[0]

    def _oarnodes(self) -> str:
        return json.dumps({str(i + 1): {"resource_id": i + 1, "network_address": n,
                                        "state": self._node_state(n)}
                           for i, n in enumerate(self.node_names)})

    def _node_state(self, node: str) -> str:
        return "Suspected" if node in self.dead else "Absent" if node in self.absent else "Alive"

    def _oarstat(self, jobs: list[FakeOarJob], *, full: bool) -> str:
        out = {}
        for job in jobs:
            doc = {"Job_Id": job.job_id, "name": job.name, "owner": job.owner,
                   "state": job.state, "assigned_network_address": job.nodes,
                   "submissionTime": job.submit, "startTime": job.start, "command": job.command,
                   "message": f"R={job.want},W={_hms(job.walltime)},J=B (Karma=0.000,quota_ok)"}
            if full:
                doc.update(stopTime=job.stop, exit_code=job.exit_code, walltime=job.walltime,
                           events=[{"type": e, "description": _EVENT_TEXT.get(e, "")}
                                   for e in job.events])
            out[str(job.job_id)] = doc
        return json.dumps(out)


def _hms(seconds: int) -> str:
    """OAR's ``W=`` form of a wall time (no padding: ``0:5:0``)."""
    return f"{seconds // 3600}:{seconds % 3600 // 60}:{seconds % 60}"
