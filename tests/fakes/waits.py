"""Unique testbed names and waits on monotonic deadlines (integration and contract tests)."""

from __future__ import annotations

import itertools
import logging
import os
import shlex
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from malleable.testbed import Docker, Testbed, Topology

logger = logging.getLogger(__name__)

TestbedFactory = Callable[..., Testbed]
_counter = itertools.count()


def unique_name(prefix: str = "it") -> str:
    """A testbed name no other test run on this machine uses; ``MALLEABLE_TESTBED_PREFIX``
    goes in front (so several people sharing a Docker daemon can tell their testbeds)."""
    return f"{os.environ.get('MALLEABLE_TESTBED_PREFIX', '')}{prefix}{os.getpid()}-" \
        f"{next(_counter)}"


def own_testbed(prefix: str, topology: Topology, root: Path, docker: Docker,
                timeout: float = 600.0) -> Iterator[Testbed]:
    """A testbed of its own for a module-scoped fixture (``yield from``): up at the first
    test that needs it, down after the module's last, even when the bring-up failed (the
    session factory's testbeds stay up to the session's end: one OAR testbed at a time)."""
    tb = Testbed(unique_name(prefix), root=root, docker=docker)
    try:
        tb.up(topology, timeout=timeout)
        yield tb
    finally:
        try:
            tb.down()
        except Exception:  # the test's own outcome matters more than a failed take-down
            logger.exception("could not take testbed %s down", tb.name)


def wait_for(predicate: Callable[[], bool], timeout: float, what: str,
             interval: float = 0.5, explain: Callable[[], str] | None = None) -> None:
    """Poll ``predicate`` until it holds, failing the test after ``timeout`` seconds (with
    what ``explain()`` says then, e.g. the queue and the nodes' states)."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() >= deadline:
            said = f"\n{explain()}" if explain is not None else ""
            pytest.fail(f"timed out after {timeout:g} s waiting for {what}{said}")
        time.sleep(interval)


def run_until(tb: Testbed, site: str, user: str, argv: list[str],
              done: Callable[[], bool], timeout: float, what: str) -> None:
    """Run ``argv`` in the background in ``site``'s controller as ``user`` (killed by
    ``timeout`` after ``timeout`` seconds at most) until ``done()`` holds, then stop it; fail
    the test if ``done()`` does not hold within ``timeout`` seconds."""
    script = f"timeout {timeout:g} {shlex.join(argv)} >/dev/null 2>&1 < /dev/null & echo $!"
    pid = tb.exec(site, ["sh", "-c", script], user=user, timeout=30, check=True).stdout.strip()
    try:
        wait_for(done, timeout, what)
    finally:
        tb.exec(site, ["kill", pid], user=user, timeout=30)  # it may have ended: no check


def site_state(tb: Testbed, site: str) -> str:
    """A Slurm site's jobs (also those ended in the last MinJobAge seconds, with the last
    reason each was pending for) and each node's state and reason: said when a wait fails."""
    return f"{site}:\n" + tb.exec(site, ["sh", "-c", "squeue -a -t all -o '%i %u %T %D %j %N %r'; "
                                       "sinfo -N -h -o '%N %T %E'"], timeout=30).stdout


def site_quiet(tb: Testbed, site: str) -> bool:
    """Is the Slurm site's queue empty and every node idle? (The integration tests share
    one testbed: the tests before may leave jobs ending or nodes returning.)"""
    out = tb.exec(site, ["sh", "-c", "squeue -h -o %i; sinfo -h -o %t"], timeout=30).stdout
    return out.split() == ["idle"]


def clear_selection(tb: Testbed, site: str) -> None:
    """The testbed administrator's ``scontrol reconfigure`` on a quiet Slurm site.

    A Slurm 22.05 bug (select/linear), reproduced by hand on the testbed (docs/slurm.md,
    "select/linear after a hand-over"): after a job grew by a helper's hand-over, shrank, and
    another job was placed on a node it released, cancelling both leaves that node refused by
    the scheduler ("Resources") while ``sinfo`` shows it idle, until an administrator runs
    ``scontrol reconfigure``. The manager runs as an operator and cannot; a test that starts
    after such a sequence (the shared testbed) would see its grows refused for minutes.

    Only on 22.05: 24.11 and 26.05 leave nothing after the same sequence, and there
    ``scontrol reconfigure`` restarts slurmctld, whose nodes then come back one by one (a
    CI run's next ``observe`` saw 3 of vu's 4 nodes in service). After it, waits until every
    node of the site is idle again, so that the caller starts from the state it checked.
    """
    from malleable.adapters.slurm.parse import parse_sinfo_json

    if tb.record().slurm != "22.05":
        return
    tb.exec(site, ["scontrol", "reconfigure"], timeout=60, check=True)

    def all_idle() -> bool:
        out = tb.exec(site, ["sinfo", "--json"], timeout=30)
        if not out.ok:
            return False
        nodes = parse_sinfo_json(out.stdout)
        return bool(nodes) and all(n.idle for n in nodes)

    wait_for(all_idle, 120, f"every {site} node idle after scontrol reconfigure",
             explain=lambda: site_state(tb, site))


def slurm_matrix() -> tuple[str, ...]:
    """The Slurm versions the version matrix runs (resize and contract tests on each).

    ``MALLEABLE_SLURM_VERSIONS`` (comma-separated, e.g. ``22.05``) narrows it; by default
    every supported version, the default first. Unknown versions fail the collection.
    """
    from malleable.testbed.versions import DEFAULT, SUITES, check

    wanted = os.environ.get("MALLEABLE_SLURM_VERSIONS", "")
    versions = [check(v.strip()) for v in wanted.split(",") if v.strip()] or list(SUITES)
    return tuple(sorted(set(versions), key=lambda v: (v != DEFAULT, v)))
