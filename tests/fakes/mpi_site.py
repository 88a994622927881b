"""A fake Slurm site for the MPI runner: one job (Slurm id 7), nodes with files, and an
application behind the channel that answers offers by its size rule.

Used by tests/unit/test_mpi_runner.py (MpiJob), tests/unit/test_mpi_runner_site.py and
the MpiSite driver of the contract suite.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from malleable.adapters.shell import Result
from malleable.adapters.slurm.parse import SlurmJob
from malleable.adapters.slurm.resize import Outcome, ResizeResult
from malleable.errors import ExternalError
from malleable.model import SizeRule

NODES = ["n1", "n2", "n3", "n4", "n5", "n6"]
HOST = {"n1": "c0", "n2": "c0", "n3": "c1", "n4": "c1", "n5": "c2", "n6": "c2"}


@dataclass
class FakeSite:
    """A Slurm site with one job, nodes with files, and an application behind the channel."""

    free: list[str] = field(default_factory=lambda: NODES[2:])
    alloc: list[str] = field(default_factory=lambda: NODES[:2])
    files: dict[tuple[str, str], str] = field(default_factory=dict)
    state: str = "RUNNING"
    rule: SizeRule = SizeRule.ANY
    app_size: int = 2
    answers: bool = True
    spawn_error: str = ""
    log: list[list[str]] = field(default_factory=list)
    cancelled: list[int] = field(default_factory=list)
    show_errors: int = 0
    """How many of the next ``squeue --json`` fail as a slow controller's do."""
    update_errors: int = 0
    """How many of the next ``scontrol update`` Slurm refuses (the allocation stays)."""
    lost_reads: list[str] = field(default_factory=list)
    """Files whose next read fails as a stalled connection does (one per entry)."""

    # the CommandRunner protocol
    def run(self, argv: Sequence[str], timeout: float, *, input: str | None = None,
            check: bool = True) -> Result:
        argv = list(argv)
        self.log.append(argv)
        if argv[0] == "ssh":
            return self.on_node(argv[3], shlex.split(argv[4]), input)
        if argv[:2] == ["squeue", "--json"]:
            return self.show()
        if argv[:3] == ["scontrol", "show", "hostnames"]:
            return Result(0, "\n".join(argv[3].split(",")) + "\n", "")
        if argv[:2] == ["scontrol", "update"] and self.update_errors > 0:
            self.update_errors -= 1
            return Result(1, "", "scontrol: error: Job is no longer pending execution\n")
        if argv[:2] == ["scontrol", "update"]:
            keep = argv[3].removeprefix("NodeList=").split(",")
            self.free += [n for n in self.alloc if n not in keep]
            self.alloc = [n for n in self.alloc if n in keep]
            return Result(0, "", "")
        raise AssertionError(f"unexpected command {argv}")

    def close(self) -> None:
        pass

    def show(self) -> Result:
        """``squeue --json`` as 22.05 answers it: every job of the site (here job 7 and
        another user's job 8), whatever ``--jobs`` asked for."""
        if self.show_errors > 0:
            self.show_errors -= 1
            return Result(1, "", "slurm_load_jobs error: Socket timed out on send/recv "
                                 "operation\n")
        other = {"job_id": 8, "job_state": "RUNNING", "batch_host": "n6", "nodes": "n6",
                 "node_count": 1}
        if self.state == "GONE":
            return Result(0, json.dumps({"errors": [], "jobs": [other]}), "")
        job = {"job_id": 7, "job_state": self.state, "batch_host": "n1",
               "nodes": ",".join(self.alloc), "node_count": len(self.alloc)}
        return Result(0, json.dumps({"errors": [], "jobs": [other, job]}), "")

    def on_node(self, node: str, argv: list[str], data: str | None) -> Result:
        host = HOST[node]
        if argv[0] == "cat":
            lost = [name for name in self.lost_reads if argv[1].endswith(name)]
            if lost:
                self.lost_reads.remove(lost[0])
                raise ExternalError("ssh malleable@login: cannot open a channel: Timeout "
                                    "opening channel.")
            text = self.files.get((host, argv[1]))
            return Result(0, text, "") if text is not None else Result(1, "", "no such file")
        if argv[:2] == ["sh", "-c"]:
            self.files[(host, argv[4])] = data or ""
            if argv[4].endswith("/offer.json"):
                self.app_reads(json.loads(data or "{}"))
            return Result(0, host + "\n" if "hostname" in argv[2] else "", "")
        if argv[0] == "ps":
            return Result(0, "", "")
        raise AssertionError(f"unexpected node command {argv}")

    def app_reads(self, offer: dict[str, Any]) -> None:
        """The application at its next reconfiguration point."""
        if not self.answers:
            return
        ch = ".malleable/run/7/ch"
        target = offer["target"]
        if target > self.app_size:
            new = self.rule.largest_fit(min(target, len(offer["hosts"])))
            new = new if new > self.app_size else self.app_size
        else:
            new = self.rule.largest_fit(target) if target < self.app_size else self.app_size
        self.files[("c0", f"{ch}/answer-{offer['seq']}.json")] = json.dumps(
            {"seq": offer["seq"], "accepted": new})
        if new == self.app_size:  # as malleable.mpi does: a completion with no change
            self.files[("c0", f"{ch}/done-{offer['seq']}.json")] = json.dumps(
                {"seq": offer["seq"], "size": new, "error": ""})
        else:
            size = self.app_size if self.spawn_error else new
            self.files[("c0", f"{ch}/done-{offer['seq']}.json")] = json.dumps(
                {"seq": offer["seq"], "size": size, "error": self.spawn_error})
            self.app_size = size


@dataclass
class FakeResizer:
    site: FakeSite

    def expand(self, job_id: int, target: int) -> ResizeResult:
        take = self.site.free[:target - len(self.site.alloc)]
        self.site.free = self.site.free[len(take):]
        self.site.alloc += take
        outcome = Outcome.REFUSED if not take else Outcome.DONE
        return ResizeResult(job_id, 0, target, len(self.site.alloc), outcome,
                            nodes_after=",".join(self.site.alloc))


@dataclass
class FakeCtl:
    site: FakeSite
    submitted: list[tuple[list[str], str]] = field(default_factory=list)

    def submit(self, options: Sequence[str], script: str) -> int:
        self.submitted.append((list(options), script))
        return 7

    def cancel(self, job_id: int) -> Result:
        self.site.cancelled.append(job_id)
        self.site.state = "CANCELLED"
        return Result(0, "", "")

    def poll(self) -> Any:
        helper = SlurmJob(8, "m.helper", "PENDING", 1,
                          comment='{"malleable":1,"run":"x","helper_for":7}')
        return type("Poll", (), {"jobs": (helper,), "nodes": ()})()
