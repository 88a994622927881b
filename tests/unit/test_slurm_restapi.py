"""The pure pieces of the REST transport (:mod:`malleable.adapters.slurm.restapi`)."""

from __future__ import annotations

import base64
import json

import pytest

import malleable.adapters.slurm.restapi as api
from malleable.adapters.slurm.parse import ParseError


def _jwt(claims: dict[str, object]) -> str:
    def part(doc: dict[str, object]) -> str:
        return base64.urlsafe_b64encode(json.dumps(doc).encode()).decode().rstrip("=")

    return f"{part({'alg': 'HS256', 'typ': 'JWT'})}.{part(claims)}.c2lnbmF0dXJl"


def test_versions_from_an_openapi_document_and_the_newest_spoken_one() -> None:
    spec = {"paths": {"/slurm/v0.0.38/jobs": {}, "/slurm/v0.0.37/ping": {},
                      "/slurmdb/v0.0.38/jobs": {}, "/openapi": {}}}
    assert api.api_versions(spec) == [(0, 0, 37), (0, 0, 38)]
    assert api.choose_version(api.api_versions(spec)) == (0, 0, 38)
    assert api.choose_version([(0, 0, 40), (0, 0, 41), (0, 0, 42)]) == (0, 0, 42)
    assert api.choose_version([(0, 0, 42), (0, 0, 45), (0, 0, 46)]) == (0, 0, 45)
    with pytest.raises(ParseError, match=r"offered: v0\.0\.36"):
        api.choose_version([(0, 0, 36)])
    with pytest.raises(ParseError, match="paths"):
        api.api_versions({})
    assert not api.can_allocate((0, 0, 38)) and api.can_allocate((0, 0, 41))


def test_jwt_claims_and_token_text() -> None:
    token = _jwt({"exp": 1700000000, "iat": 1699990000, "sun": "malleable"})
    claims = api.jwt_claims(token)
    assert (claims.user, claims.expires) == ("malleable", 1700000000.0)
    assert api.read_token(f"SLURM_JWT={token}\n") == token
    assert api.read_token(token) == token
    for bad in ("", "a b", "x;rm -rf /", "SLURM_JWT=", "tok\nen"):
        with pytest.raises(ParseError):
            api.read_token(bad)
    for bad in ("a.b", "a.!!!.c", f"x.{base64.urlsafe_b64encode(b'[1]').decode()}.y"):
        with pytest.raises(ParseError):
            api.jwt_claims(bad)


def test_job_description_in_both_layouts() -> None:
    options = ["--partition=batch", "--job-name=m.a", "--comment=tag", "--nodes=2",
               "--exclusive", "--no-requeue", "--time=5", "--output=/tmp/x-%j.out", "--hold"]
    old = api.job_description(options, (0, 0, 38), user="malleable", workdir="/tmp")
    assert old["nodes"] == "2" and old["time_limit"] == 5 and old["exclusive"] == "exclusive"
    assert old["environment"]["USER"] == "malleable" and old["hold"] is True
    assert old["requeue"] is False and old["standard_output"] == "/tmp/x-%j.out"
    new = api.job_description(options, (0, 0, 41), user="malleable", workdir="/tmp",
                              immediate=True)
    assert new["minimum_nodes"] == 2 and "maximum_nodes" not in new  # as sbatch -N2
    ranged = api.job_description(["--nodes=2-4"], (0, 0, 41), user="u", workdir="/w")
    assert (ranged["minimum_nodes"], ranged["maximum_nodes"]) == (2, 4)
    assert new["time_limit"] == {"set": True, "number": 5} and new["shared"] == ["none"]
    assert "USER=malleable" in new["environment"] and new["immediate"] is True
    assert (new["name"], new["comment"], new["partition"]) == ("m.a", "tag", "batch")
    with pytest.raises(ValueError, match="no REST translation"):
        api.job_description(["--wrap=rm -rf /"], (0, 0, 41), user="u", workdir="/tmp")
    with pytest.raises(ValueError):
        api.job_description(["--exclusive=user"], (0, 0, 41), user="u", workdir="/tmp")


def test_time_limits_and_resize_bodies() -> None:
    assert [api.time_minutes(t) for t in ("7", "0", "1:30", "2:00:00", "1-0", "1-2:03:04")] \
        == [7, 1, 2, 120, 1440, 1564]
    assert api.resize_body("1", (0, 0, 38)) == {"nodes": "1-0"}
    assert api.resize_body("3", (0, 0, 42)) == {"minimum_nodes": 3}


def test_answers_job_ids_and_errors() -> None:
    assert api.job_id_of({"job_id": 12}) == 12
    assert api.job_id_of({"result": {"job_id": 13}}) == 13
    with pytest.raises(ParseError):
        api.job_id_of({"job_id": True})
    answer = {"errors": [{"description": "Requested node configuration is not available",
                          "error_number": 2014}, {"error": "x"}]}
    assert api.errors_of(answer) == ("Requested node configuration is not available "
                                     "(error 2014); x")
    assert api.errors_of({"errors": []}) == ""


def test_admin_level_both_layouts() -> None:
    assert api.admin_level({"users": [{"administrator_level": ["Operator"]}]}) == "Operator"
    assert api.admin_level({"users": [{"administrator_level": "Administrator"}]}) \
        == "Administrator"
    assert api.admin_level({"users": []}) == "None"


def test_a_helper_is_charged_like_its_job_and_ends_no_later() -> None:
    from malleable.adapters.slurm.parse import SlurmJob, parse_scontrol_jobs
    from malleable.adapters.slurm.resize import helper_charge

    job = SlurmJob(7, "j", "RUNNING", 2, account="proj2", partition="batch", qos="gold",
                   reservation="maint", start_time=1000.0, time_limit=30)
    assert helper_charge(job, 1000.0 + 600.5) == ["--account=proj2", "--partition=batch",
                                                  "--qos=gold", "--reservation=maint",
                                                  "--time=19"]
    assert "has 30 s left" in str(helper_charge(job, 1000.0 + 1770.0))
    # polled in its first second: 30 minutes left, exactly; the helper must end before it
    assert helper_charge(job, 1000.0)[-1] == "--time=29"
    assert "has 60 s left" in str(helper_charge(job, 1000.0 + 1740.0))
    unlimited = SlurmJob(8, "j", "RUNNING", 2, account="users", partition="batch")
    assert helper_charge(unlimited, 5.0) == ["--account=users", "--partition=batch"]
    line = ("JobId=9 JobName=x UserId=alice(2001) Account=proj2 QOS=gold JobState=RUNNING "
            "RunTime=00:10:30 TimeLimit=01:00:00 Partition=batch Reservation=(null) NumNodes=2")
    (shown,) = parse_scontrol_jobs(line)
    assert (shown.account, shown.qos, shown.reservation, shown.time_limit) == (
        "proj2", "gold", "", 60)
    assert helper_charge(shown, 0.0) == ["--account=proj2", "--partition=batch", "--qos=gold",
                                         "--time=49"]


# ----------------------------------------------------------------- recorded answers

from pathlib import Path  # noqa: E402

REST = Path(__file__).resolve().parents[1] / "data" / "slurm" / "rest"


def _rec(version: str, name: str) -> dict[str, object]:
    data: dict[str, object] = json.loads((REST / version / name).read_text())
    return data


@pytest.mark.parametrize(("version", "api_version"), [("22.05", (0, 0, 38)),
                                                     ("24.11", (0, 0, 42)),
                                                     ("26.05", (0, 0, 45))])
def test_recorded_answers_of_each_version(version: str, api_version: tuple[int, int, int]
                                          ) -> None:
    from malleable.adapters.slurm.rest import parse_sinfo_data, parse_squeue_json_data

    assert api.choose_version(api.api_versions(_rec(version, "openapi_paths.json"))) \
        == api_version
    submitted = _rec(version, "submit_held.json")
    job_id = api.job_id_of(submitted)
    if version == "22.05":  # an "error" beside the id, not a failure
        assert "held state" in api.errors_of(submitted)
    (job,) = [j for j in parse_squeue_json_data(_rec(version, "jobs.json"))
              if j.job_id == job_id]
    assert (job.state_raw.split()[0], job.nodes, job.name, job.comment) == (
        "RUNNING", 2, "m.rec", "rec")
    assert (job.account, job.qos, job.partition, job.time_limit) == ("users", "normal",
                                                                      "batch", 5)
    nodes = parse_sinfo_data(_rec(version, "nodes.json"))
    assert len(nodes) == 4 and sum(n.in_service for n in nodes) == 4
    assert sum(not n.idle for n in nodes) == 2  # the job's two nodes
    assert "error 2073" in api.errors_of(_rec(version, "update_refused.json"))
    (ended,) = api.parse_slurmdb_jobs(_rec(version, "slurmdb_jobs.json"))
    assert (ended.job_id, ended.state_raw.split()[0], ended.nodes) == (job_id, "CANCELLED", 2)
    assert ended.start_time is not None and ended.end_time is not None
