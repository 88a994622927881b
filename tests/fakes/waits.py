"""Unique testbed names and waits on monotonic deadlines (integration and contract tests)."""

from __future__ import annotations

import itertools
import os
import time
from collections.abc import Callable

import pytest

from malleable.testbed import Testbed

TestbedFactory = Callable[..., Testbed]
_counter = itertools.count()


def unique_name(prefix: str = "it") -> str:
    """A testbed name no other test run on this machine uses."""
    return f"{prefix}{os.getpid()}-{next(_counter)}"


def wait_for(predicate: Callable[[], bool], timeout: float, what: str,
             interval: float = 0.5) -> None:
    """Poll ``predicate`` until it holds, failing the test after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() >= deadline:
            pytest.fail(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(interval)


def slurm_matrix() -> tuple[str, ...]:
    """The Slurm versions the version matrix runs (resize and contract tests on each).

    ``MALLEABLE_SLURM_VERSIONS`` (comma-separated, e.g. ``22.05``) narrows it; by default
    every supported version, the default first. Unknown versions fail the collection.
    """
    from malleable.testbed.versions import DEFAULT, SUITES, check

    wanted = os.environ.get("MALLEABLE_SLURM_VERSIONS", "")
    versions = [check(v.strip()) for v in wanted.split(",") if v.strip()] or list(SUITES)
    return tuple(sorted(set(versions), key=lambda v: (v != DEFAULT, v)))
