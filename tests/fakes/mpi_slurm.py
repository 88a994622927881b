"""The fake Slurm site with MPI programs on its nodes, for MpiSite's own path.

:class:`FakeMpiSlurm` answers everything :class:`~tests.fakes.slurm.FakeSlurm` does,
plus what the MPI runner (:class:`~malleable.runner.job.MpiJob`) needs: its job read
with ``squeue --json`` (every job listed, as 22.05 does), ``scontrol show hostnames``,
``scontrol update NodeList=`` (a shrink to the nodes listed), and commands on the nodes
through ``ssh`` (read, write and stage files, ``ps``). Every node is its own MPI host.
The nodes file a running job's batch script would write is read from the job itself, and an
application behind each job's channel answers offers at once (size rule ANY: it takes
every host offered, and leaves when asked).
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field

from malleable.adapters.shell import Result
from tests.fakes.slurm import FakeSlurm

RUN = ".malleable/run"
_NODES = re.compile(rf"^{RUN}/(\d+)/nodes$")
_OFFER = re.compile(rf"^{RUN}/(\d+)/ch/offer\.json$")


@dataclass
class FakeMpiSlurm(FakeSlurm):
    files: dict[str, str] = field(default_factory=dict)
    app_sizes: dict[int, int] = field(default_factory=dict)

    def _dispatch(self, args: list[str], input: str | None) -> Result:
        if args[0] == "ssh":
            return self._on_node(shlex.split(args[4]), input)
        if args[:3] == ["scontrol", "show", "hostnames"]:
            return Result(0, "\n".join(n for n in args[3].split(",") if n) + "\n", "")
        if args[:2] == ["scontrol", "update"] and args[3].startswith("NodeList="):
            return self._keep(int(args[2].split("=")[1]), args[3].split("=")[1].split(","))
        return super()._dispatch(args, input)

    def _keep(self, job_id: int, keep: Sequence[str]) -> Result:
        job = self.jobs[job_id]
        job.nodes = [n for n in job.nodes if n in keep]
        self._schedule()
        return Result(0, "", "")

    # ------------------------------------------------------------ the nodes

    def _on_node(self, argv: list[str], data: str | None) -> Result:
        if argv[0] == "cat":
            text = self._read(argv[1])
            return Result(0, text, "") if text is not None else Result(1, "", "no such file")
        if argv[:2] == ["sh", "-c"]:
            path = argv[4]
            self.files[path] = data or ""
            found = _OFFER.match(path)
            if found:
                self._answer(int(found.group(1)), json.loads(data or "{}"))
            return Result(0, "host\n" if "hostname" in argv[2] else "", "")
        if argv[0] == "ps":
            return Result(0, "", "")
        return Result(127, "", f"fake node: unknown command {argv}")

    def _read(self, path: str) -> str | None:
        found = _NODES.match(path)
        if found is None:
            return self.files.get(path)
        job = self.jobs.get(int(found.group(1)))
        if job is None or job.state != "RUNNING":
            return None
        self.app_sizes.setdefault(job.job_id, len(job.nodes))
        return "".join(f"{n} {n}\n" for n in job.nodes)

    def _answer(self, job_id: int, offer: dict[str, object]) -> None:
        """The application at its next reconfiguration point: takes what it is offered."""
        seq, target, hosts = offer["seq"], offer["target"], offer["hosts"]
        assert isinstance(target, int) and isinstance(hosts, list)
        size = self.app_sizes.get(job_id, 0)
        new = min(target, len(hosts))
        ch = f"{RUN}/{job_id}/ch"
        self.files[f"{ch}/answer-{seq}.json"] = json.dumps({"seq": seq, "accepted": new})
        if new != size:
            self.files[f"{ch}/done-{seq}.json"] = json.dumps({"seq": seq, "size": new,
                                                              "error": ""})
            self.app_sizes[job_id] = new
