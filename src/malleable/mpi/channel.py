"""The file channel between a runner and a malleable application (rank 0).

A directory holds small JSON files; each is written to a temporary name and
renamed, so a reader never sees half a file. The runner writes; the application
answers:

``offer.json`` (runner)
    ``{"seq": 3, "target": 4, "hosts": ["n1", "n2", "n3", "n4"], "mandatory": false}``:
    the latest offer (hosts in rank order, ``"host:k"`` for k processes); ``seq``
    grows with each offer.
``answer-<seq>.json`` (application)
    ``{"seq": 3, "accepted": 4, "size": 2, "iteration": 17}``: the new total it takes
    (``accepted == size``: declined).
``done-<seq>.json`` (application, new process set)
    ``{"seq": 3, "size": 4, "iteration": 17, "seconds": 0.8, "error": ""}``: the resize
    is over (or failed, with ``error``); the old processes have left.
``request-<n>.json`` (application)
    ``{"n": 1, "target": 8, "iteration": 40}``: the application asks for a size itself.
``exit`` (the batch script)
    mpirun's exit code, once it has ended.
``progress.json`` (application)
    ``{"iteration": 40, "size": 4, "time": ...}``: rewritten at every check.
``events.jsonl`` (application)
    one JSON object per line: ``start``, ``resize`` and ``finish`` events with the
    iteration, the size and the time, for the runner's per-phase report.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from malleable.mpi.sources import Offer, Point, Report

logger = logging.getLogger(__name__)

OFFER = "offer.json"
EVENTS = "events.jsonl"
PROGRESS = "progress.json"


def write_json(path: Path, data: Mapping[str, Any]) -> None:
    """Write ``data`` to ``path`` atomically (temporary file, then rename)."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(data, sort_keys=True) + "\n")
    os.replace(tmp, path)


def read_json(path: Path) -> dict[str, Any] | None:
    """The object in ``path``, or None when the file does not exist (yet)."""
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        return None
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a JSON object")
    return data


def offer_to_json(offer: Offer) -> dict[str, Any]:
    return {"seq": offer.seq, "target": offer.target, "hosts": list(offer.hosts),
            "mandatory": offer.mandatory}


def offer_from_json(data: Mapping[str, Any]) -> Offer:
    """Parse an offer; ValueError naming the field when it is malformed."""
    try:
        seq, target = int(data["seq"]), int(data["target"])
        hosts = tuple(str(h) for h in data.get("hosts", ()))
        mandatory = bool(data.get("mandatory", False))
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"malformed offer {dict(data)!r}: {exc}") from None
    if seq < 1 or target < 1:
        raise ValueError(f"offer needs seq >= 1 and target >= 1, got {dict(data)!r}")
    return Offer(target, hosts, mandatory, seq)


@dataclass
class FileChannel:
    """The application's end of the channel (a :class:`~malleable.mpi.sources.ResizeSource`)."""

    directory: Path
    handled: int = 0
    requests: int = 0

    def __post_init__(self) -> None:
        self.directory = Path(self.directory)

    def poll(self, point: Point) -> Offer | None:
        write_json(self.directory / PROGRESS, {"iteration": point.iteration, "size": point.size,
                                               "time": time.time()})
        data = read_json(self.directory / OFFER)
        if data is None:
            return None
        try:
            offer = offer_from_json(data)
        except ValueError as exc:
            logger.warning("ignoring %s: %s", self.directory / OFFER, exc)
            return None
        return offer if offer.seq > self.handled else None

    def answered(self, offer: Offer, point: Point, accepted: int) -> None:
        self.handled = max(self.handled, offer.seq)
        write_json(self.directory / f"answer-{offer.seq}.json",
                   {"seq": offer.seq, "accepted": accepted, "size": point.size,
                    "iteration": point.iteration})

    def completed(self, report: Report) -> None:
        self.handled = max(self.handled, report.seq)
        write_json(self.directory / f"done-{report.seq}.json",
                   {"seq": report.seq, "size": report.size, "iteration": report.iteration,
                    "seconds": report.seconds, "error": report.error})

    def request(self, target: int, iteration: int) -> int:
        """Ask the runner for ``target`` processes in total (application-initiated)."""
        self.requests += 1
        write_json(self.directory / f"request-{self.requests}.json",
                   {"n": self.requests, "target": target, "iteration": iteration})
        return self.requests

    def record(self, event: Mapping[str, Any]) -> None:
        line = json.dumps({"time": time.time(), **event}, sort_keys=True)
        with (self.directory / EVENTS).open("a") as out:
            out.write(line + "\n")

    def snapshot(self) -> dict[str, Any]:
        return {"handled": self.handled, "requests": self.requests}

    def restore(self, state: Mapping[str, Any]) -> None:
        self.handled = int(state.get("handled", 0))
        self.requests = int(state.get("requests", 0))
