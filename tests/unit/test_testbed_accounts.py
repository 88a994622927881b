"""The accounting set-up of the testbed's users (pure parts, and the calls it makes)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

import malleable.testbed.accounts as accounts
from malleable.errors import ExternalError
from malleable.testbed.docker import Result


class FakeTestbed:
    """Answers sacctmgr like a slurmdbd that knows ``known`` clusters."""

    name = "fake"

    def __init__(self, known: str, fail: str = "") -> None:
        self.known, self.fail = known, fail
        self.calls: list[tuple[str, tuple[str, ...]]] = []

    def exec(self, site: str, argv: Sequence[str], **_: Any) -> Result:
        self.calls.append((site, tuple(argv)))
        if tuple(argv) == accounts.CLUSTERS_ARGS:
            return Result(tuple(argv), 0, self.known, "")
        if self.fail and self.fail in argv:
            return Result(tuple(argv), 1, "", "sacctmgr: error: boom")
        return Result(tuple(argv), 0, "", "")


def test_parse_clusters() -> None:
    assert accounts.parse_clusters("vu\nuva\n\n") == {"vu", "uva"}
    assert accounts.parse_clusters("") == set()


def test_setup_commands_name_every_cluster_and_user() -> None:
    add_account, add_users, operator = accounts.setup_commands(["vu", "uva"])
    assert add_account[:5] == ["sacctmgr", "-i", "add", "account", "users"]
    assert "cluster=vu,uva" in add_account and "cluster=vu,uva" in add_users
    assert "malleable,alice,bob,carol" in add_users
    assert operator[-1] == "adminlevel=operator" and "name=malleable" in operator


def test_setup_waits_for_registration_then_runs_the_commands() -> None:
    tb = FakeTestbed("vu\nuva\n")
    accounts.setup(tb, ["vu", "uva"])  # type: ignore[arg-type]
    ran = [argv for _, argv in tb.calls if argv != accounts.CLUSTERS_ARGS]
    assert ran == [tuple(c) for c in accounts.setup_commands(["vu", "uva"])]
    assert {site for site, _ in tb.calls} == {"vu"}


def test_setup_fails_clearly_when_a_cluster_never_registers() -> None:
    tb = FakeTestbed("vu\n")
    with pytest.raises(ExternalError, match=r"cluster\(s\) uva did not register"):
        accounts.setup(tb, ["vu", "uva"], timeout=0.0)  # type: ignore[arg-type]


def test_setup_reports_a_failing_sacctmgr() -> None:
    tb = FakeTestbed("vu\n", fail="modify")
    with pytest.raises(ExternalError, match="boom"):
        accounts.setup(tb, ["vu"])  # type: ignore[arg-type]


def test_no_slurm_site_no_accounting() -> None:
    tb = FakeTestbed("")
    accounts.setup(tb, [])  # type: ignore[arg-type]
    assert tb.calls == []
