"""Tagged users' jobs in an OAR poll (site/oarjobs.py), on ``oarstat -J`` recorded on a
testbed OAR site: alice's held and running tagged jobs (submitted with ``malleable
submit --config``), her invalid tag, her untagged job, the service account's own."""

from __future__ import annotations

from pathlib import Path

from malleable.adapters.oar.parse import OarJob, parse_oarstat
from malleable.site import tag as tags
from malleable.site.oarjobs import discover

RECORDED = Path(__file__).parent.parent / "data" / "oar" / "oarstat-tagged.json"


def _jobs() -> list[OarJob]:
    return parse_oarstat(RECORDED.read_text())


def test_tagged_jobs_are_found_with_oarstat_s_owner() -> None:
    seen = discover(_jobs(), "grid", "malleable")
    assert sorted(seen.found) == [1, 6]
    held, running = seen.found[1], seen.found[6]
    assert held.job_id == "alice:a4669419" and held.user == "alice" and held.held
    assert held.tag == tags.UserTag(1, 2, app="jacobi", sub="a4669419")
    assert not running.held and running.state_raw == "Running"
    assert running.nodes == ("grid-n001",) and running.tag.sub == "a464ab39"


def test_an_invalid_tag_is_refused_and_other_jobs_left_alone() -> None:
    seen = discover(_jobs(), "grid", "malleable")
    assert seen.refused == {2: "min 3 is above max 2"}
    names = {j.job_id: j.name for j in _jobs()}
    assert names[7] == "bg" and 7 not in seen.found  # untagged: background load
    assert names[5] == "m1;min=1;max=1" and 5 not in seen.found  # the service's own


def test_the_owner_is_oarstat_s_never_the_name_s() -> None:
    forged = OarJob(11, "m1;min=1;max=2;sub=a4669419", "bob", "Hold", (), None, None, None)
    seen = discover([*_jobs(), forged], "grid", "malleable")
    assert seen.found[11].job_id == "bob:a4669419" != seen.found[1].job_id
    nameless = OarJob(12, "m1;min=1;max=2", "", "Hold", (), None, None, None)
    assert discover([nameless], "grid", "malleable").refused == {12: "OAR reports no owner"}


def test_ended_jobs_and_a_job_without_sub_id() -> None:
    ended = OarJob(13, "m1;min=1;max=2", "alice", "Terminated", (), None, None, None, 0)
    plain = OarJob(14, "m1;min=2;max=4;mpi", "carol", "Waiting", (), None, None, None)
    seen = discover([ended, plain], "grid", "malleable")
    assert list(seen.found) == [14] and seen.found[14].job_id == "carol:grid.14"
    assert seen.found[14].tag.mpi and not seen.found[14].held
