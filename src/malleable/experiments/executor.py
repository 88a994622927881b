"""Where an experiment's runs execute: here (``local``) or as one Slurm job array.

Every ``malleable experiment NAME`` takes ``--executor local|slurm`` (added once, by
:func:`add_arguments`, for all of them). An experiment hands its runs to
:meth:`Executor.map` as a function and a list of argument tuples; it gets the results
back in the order of the list, whatever order they finished in, so that figures, report
and summary.json do not depend on where the runs went.

``local`` (the default) runs them in this process, or on ``--workers`` processes.
``slurm`` is meant for a cluster's login node: the runs go out through submitit's
``map_array`` as one job array of ``ceil(runs / --runs-per-task)`` tasks, at most
``--max-tasks`` of them running at once; the progress callback fires as tasks finish;
failed tasks are named at the end (:class:`SweepFailed`) and ``--resume`` submits only
the tasks whose results are not already in the submitit folder (``--folder``, by default
``OUT/submitit``, which must be on a filesystem the compute nodes share).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import math
import os
import pickle
import re
import shutil
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar

from malleable.errors import ExternalError, InputError, MalleableError
from malleable.experiments.executor_options import KINDS as KINDS
from malleable.experiments.executor_options import add_arguments as add_arguments

logger = logging.getLogger(__name__)

R = TypeVar("R")
Args = tuple[Any, ...]
Done = Callable[[int], None]  # called with the index of each run as it finishes

MANIFEST = "malleable-sweep.json"


class SweepFailed(MalleableError):
    """Some tasks of a job array failed; the others' results are kept. Exit code 1."""


class Executor(Protocol):
    def map(self, fn: Callable[..., R], runs: Sequence[Args],
            done: Done | None = None) -> list[R]:
        """``[fn(*a) for a in runs]``, calling ``done(i)`` as run ``i`` finishes."""
        ...


def check(args: argparse.Namespace) -> None:
    """``--workers`` below 1 refused; above this machine's cores, lowered to them with a
    warning (more processes only compete for the cores)."""
    workers = getattr(args, "workers", None)
    if isinstance(workers, int) and not isinstance(workers, bool):
        if workers < 1:
            raise InputError(f"--workers {workers}: give at least 1")
        cores = os.cpu_count() or 1
        if workers > cores and args.executor == "local":
            logger.warning("--workers %d: using %d, the cores of this machine", workers, cores)
            args.workers = cores


def from_args(args: argparse.Namespace, cluster: str = "slurm") -> Executor:
    """The executor the options ask for; ``cluster`` is submitit's (tests: local, debug).
    ``--executor slurm`` where there is no Slurm is refused here (exit 3), after its
    options are checked: the experiment command calls this before anything runs."""
    check(args)
    if args.executor == "local":
        return Local(int(getattr(args, "workers", 1) or 1))
    per_task = _at_least_one(args.runs_per_task, "--runs-per-task")
    cap = None if args.max_tasks is None else _at_least_one(args.max_tasks, "--max-tasks")
    time_limit = _at_least_one(args.time_limit, "--time-limit")
    if cluster == "slurm" and shutil.which("sbatch") is None:  # submitit's own check: srun
        raise ExternalError("--executor slurm: no sbatch on this machine's PATH (run from a "
                            "Slurm login node, or use --executor local)")
    folder = args.folder if args.folder is not None else Path(args.out) / "submitit"
    return JobArray(Path(folder), cluster=cluster, runs_per_task=per_task, max_tasks=cap,
                    resume=bool(args.resume), partition=args.partition,
                    time_limit=time_limit)


def _at_least_one(value: int, flag: str) -> int:
    if value < 1:
        raise InputError(f"{flag} must be at least 1, not {value}")
    return value


@dataclass(frozen=True)
class Local:
    """Runs in this process (``workers`` 1) or on a pool of ``workers`` processes (never
    more processes than runs)."""

    workers: int = 1

    def map(self, fn: Callable[..., R], runs: Sequence[Args],
            done: Done | None = None) -> list[R]:
        results: list[Any] = [None] * len(runs)
        workers = min(self.workers, len(runs))
        if workers <= 1:
            for i, run in enumerate(runs):
                results[i] = fn(*run)
                if done is not None:
                    done(i)
            return results
        with ProcessPoolExecutor(max_workers=workers) as pool:
            futures: dict[Future[R], int] = {pool.submit(fn, *run): i
                                             for i, run in enumerate(runs)}
            for future in as_completed(futures):
                results[futures[future]] = future.result()
                if done is not None:
                    done(futures[future])
        return results


def run_batch(fn: Callable[..., R], batch: Sequence[Args]) -> list[R]:
    """What one array task runs: several runs, one after the other."""
    return [fn(*run) for run in batch]


@dataclass(frozen=True)
class JobArray:
    """The runs as one job array submitted through submitit from this (login) node."""

    folder: Path
    cluster: str = "slurm"
    runs_per_task: int = 1
    max_tasks: int | None = None
    resume: bool = False
    partition: str | None = None
    time_limit: int = 60
    poll_seconds: float = 2.0

    def map(self, fn: Callable[..., R], runs: Sequence[Args],
            done: Done | None = None) -> list[R]:
        k = self.runs_per_task
        batches = [list(runs[i:i + k]) for i in range(0, len(runs), k)]
        keys = [_key(fn, b) for b in batches]
        manifest = self._manifest() if self.resume else {}
        finished = {b: r for b, r in enumerate(self._reuse(keys, manifest)) if r is not None}
        if finished:
            logger.info("reusing %d finished tasks of %d from %s", len(finished),
                        len(batches), self.folder)
        results: list[list[R] | None] = [finished.get(b) for b in range(len(batches))]
        for b in finished:
            _report(done, b, k, len(batches[b]))
        todo = [b for b in range(len(batches)) if b not in finished]
        failures = self._submit_and_wait(fn, batches, keys, todo, manifest, results, done)
        if failures:
            raise SweepFailed(f"{len(failures)} of {len(batches)} array tasks failed "
                              f"({'; '.join(failures[:3])}); the others' results are kept "
                              f"in {self.folder}: run again with --resume")
        return [r for batch in results for r in (batch or [])]

    def _submit_and_wait(self, fn: Callable[..., R], batches: list[list[Args]],
                         keys: list[str], todo: list[int], manifest: dict[str, str],
                         results: list[list[R] | None], done: Done | None) -> list[str]:
        if not todo:
            return []
        import submitit

        executor = submitit.AutoExecutor(folder=self.folder, cluster=self.cluster)
        params: dict[str, Any] = {"timeout_min": self.time_limit, "nodes": 1,
                                  "tasks_per_node": 1, "name": "malleable-sweep"}
        if self.max_tasks is not None:
            params["slurm_array_parallelism"] = self.max_tasks
        if self.partition is not None:
            params["slurm_partition"] = self.partition
        executor.update_parameters(**params)
        jobs = executor.map_array(run_batch, [fn] * len(todo), [batches[b] for b in todo])
        manifest.update({keys[b]: str(job.job_id) for b, job in zip(todo, jobs, strict=True)})
        self._write_manifest(manifest)
        logger.info("submitted %d array tasks (job %s)", len(jobs),
                    str(jobs[0].job_id).split("_")[0])
        batch_of = {id(job): b for b, job in zip(todo, jobs, strict=True)}
        failures: list[str] = []
        for job in submitit.helpers.as_completed(jobs, poll_frequency=self.poll_seconds):
            b = batch_of[id(job)]
            try:
                results[b] = job.result()
            except Exception as exc:  # a task's failure is reported, the others go on
                failures.append(f"task {job.job_id}: {_cause(exc)} (log {job.paths.stderr})")
                continue
            _report(done, b, self.runs_per_task, len(batches[b]))
        return failures

    def _reuse(self, keys: list[str], manifest: dict[str, str]) -> list[Any]:
        from submitit.core.utils import JobPaths

        out: list[Any] = []
        for key in keys:
            job_id = manifest.get(key)
            pickle_path = JobPaths(self.folder, job_id=job_id).result_pickle if job_id else None
            out.append(_success(pickle_path))
        return out

    def _manifest(self) -> dict[str, str]:
        path = self.folder / MANIFEST
        if not path.exists():
            return {}
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise InputError(f"cannot read the sweep's manifest: {exc}", source=str(path)
                             ) from None
        return {str(k): str(v) for k, v in data.items()}

    def _write_manifest(self, manifest: dict[str, str]) -> None:
        self.folder.mkdir(parents=True, exist_ok=True)
        tmp = self.folder / (MANIFEST + ".tmp")
        tmp.write_text(json.dumps(manifest, indent=1) + "\n", encoding="utf-8")
        tmp.replace(self.folder / MANIFEST)


def _success(path: Path | None) -> Any:
    """The result in a submitit result pickle, or None when absent or an error."""
    if path is None or not path.exists():
        return None
    try:
        with path.open("rb") as f:
            outcome, result = pickle.load(f)
    except Exception:  # a truncated or foreign pickle: run the task again
        logger.warning("cannot read %s: running its task again", path)
        return None
    return result if outcome == "success" else None


def _cause(exc: Exception) -> str:
    """The exception line of a failed task's traceback (submitit's error holds it all)."""
    lines = [line for line in str(exc).splitlines() if line.strip()]
    raised = [line for line in lines if re.match(r"[A-Za-z_][\w.]*(Error|Exception)\b", line)]
    return (raised or lines or [type(exc).__name__])[-1].strip()[:200]


def _report(done: Done | None, batch: int, per_task: int, size: int) -> None:
    if done is not None:
        for i in range(batch * per_task, batch * per_task + size):
            done(i)


def _key(fn: Callable[..., Any], batch: Sequence[Args]) -> str:
    """What identifies a task across sessions: the function and its runs' arguments."""
    text = f"{fn.__module__}.{fn.__qualname__}:{batch!r}"
    return hashlib.sha256(text.encode()).hexdigest()[:20]


def tasks(runs: int, per_task: int) -> int:
    """How many array tasks ``runs`` runs make."""
    return math.ceil(runs / per_task)
