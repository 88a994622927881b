"""Every registered policy from every command: the registry, the policy spec, the
``[policy]`` table, ``--policy``/``--policy-option``/``--approach`` and ``--platform``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from malleable.cli import main
from malleable.config import parse_config
from malleable.errors import InputError
from malleable.model import DAS3, Cluster
from malleable.policies.fcfs import FCFS
from malleable.policies.koala import Approach, KoalaPolicy
from malleable.policies.registry import PolicySpec, make, names, parse_option
from malleable.service import approach_of, choose_policy, clusters_of, platform
from malleable.store import RunInfo

ALL = ["acds", "dmr", "easy", "easy-dmr", "egs", "equipartition", "fcfs", "fpsma"]
SITES = """
[clusters.a]
nodes = 16
[clusters.b]
nodes = 8
reserve = 2
speed = 1.5
"""


def test_every_builtin_is_registered() -> None:
    assert set(ALL) <= set(names())


@pytest.mark.parametrize("name", ALL)
def test_make_builds_every_builtin(name: str) -> None:
    assert make(name).decide is not None


def test_unknown_policy_lists_the_valid_ones() -> None:
    with pytest.raises(InputError, match="unknown policy 'nosuch'; valid: acds, dmr"):
        make("nosuch")


def test_unknown_option_lists_the_valid_ones() -> None:
    with pytest.raises(InputError, match="policy easy-dmr has no option foo; valid: multiples"):
        make("easy-dmr", foo=1)
    with pytest.raises(InputError, match="policy dmr has no option approach; valid: none"):
        make("dmr", approach="pra")


def test_option_types_are_checked() -> None:
    with pytest.raises(InputError, match="option multiples must be bool, not int 1"):
        make("easy-dmr", multiples=1)
    with pytest.raises(InputError, match="option approach must be str"):
        make("fpsma", approach=3)
    with pytest.raises(InputError, match="unknown approach 'sideways'"):
        make("fpsma", approach="sideways")


def test_a_factory_with_keyword_options_checks_them_itself() -> None:
    with pytest.raises(InputError, match=r"unknown option.*nonsense"):
        make("acds", nonsense=True)


def test_the_approach_is_a_koala_option() -> None:
    policy = make("egs", approach="pwa")
    assert isinstance(policy, KoalaPolicy) and policy.approach is Approach.PWA
    assert policy.name == KoalaPolicy.named("pwa", "egs").name == "koala-pwa-egs"
    assert approach_of(PolicySpec("egs")) == "pra"
    assert approach_of(PolicySpec("egs", {"approach": "none"})) == "none"
    assert approach_of(PolicySpec("fcfs")) is None
    assert isinstance(make("fcfs"), FCFS)


@pytest.mark.parametrize(("text", "pair"), [
    ("approach=pwa", ("approach", "pwa")),
    ("quantum=60", ("quantum", 60)),
    ("quantum = 2.5", ("quantum", 2.5)),
    ('levels=["site","group"]', ("levels", ["site", "group"])),
    ("multiples=false", ("multiples", False)),
    ("rule=deq", ("rule", "deq")),
])
def test_command_line_values_are_read_as_toml(text: str, pair: tuple[str, object]) -> None:
    assert parse_option(text) == pair


@pytest.mark.parametrize("text", ["novalue", "=3", ""])
def test_a_malformed_option_is_refused(text: str) -> None:
    with pytest.raises(InputError, match="write KEY=VALUE"):
        parse_option(text)


def test_choose_policy_layers_config_name_options_and_approach() -> None:
    configured = PolicySpec("acds", {"quantum": 30.0})
    assert choose_policy(configured) == configured
    assert choose_policy(configured, options={"rule": "equi"}).options == {
        "quantum": 30.0, "rule": "equi"}
    # another name drops the configured policy's options
    assert choose_policy(configured, name="egs", approach="pwa") == PolicySpec(
        "egs", {"approach": "pwa"})
    assert choose_policy() == PolicySpec("fpsma")
    with pytest.raises(InputError, match="policy dmr has no option approach"):
        choose_policy(name="dmr", approach="pwa")


def test_the_policy_table_of_a_clusters_config() -> None:
    config = parse_config({"policy": {"name": "acds", "options": {"quantum": 60.0}},
                           "clusters": {"a": {"nodes": 4}}}, "c.toml")
    assert config.policy == PolicySpec("acds", {"quantum": 60.0})
    assert parse_config({"clusters": {"a": {}}}).policy is None


@pytest.mark.parametrize(("policy", "message"), [
    ({"options": {}}, "policy.name: missing"),
    ({"name": "acds", "quantum": 1}, "policy.quantum: unknown key; valid keys: name, options"),
    ({"name": "acds", "options": 3}, "policy.options: must be a table"),
    ({"name": ""}, "policy.name: must be a non-empty string"),
])
def test_a_bad_policy_table_is_refused(policy: dict[str, object], message: str) -> None:
    with pytest.raises(InputError, match=message):
        parse_config({"policy": policy, "clusters": {"a": {}}}, "c.toml")


def test_platforms(tmp_path: Path) -> None:
    assert platform("das3") == list(DAS3)
    assert platform("128") == [Cluster("cluster", 128)]
    path = tmp_path / "sites.toml"
    path.write_text(SITES)
    assert platform(str(path)) == [Cluster("a", 16), Cluster("b", 8, 2, 1.5)]
    with pytest.raises(InputError, match="at least one node"):
        platform("0")
    with pytest.raises(InputError, match="neither das3, a node count nor a clusters config"):
        platform("das4")
    with pytest.raises(InputError, match=r"clusters\.b\.nodes: missing"):
        clusters_of(parse_config({"clusters": {"a": {"nodes": 2}, "b": {}}}))


def test_old_journals_keep_their_koala_policy() -> None:
    info = RunInfo("r", 0.0, 1.0, "pwa", "egs", "wm")
    assert info.options == {}
    from malleable.service import held_policy

    assert held_policy(info) == PolicySpec("egs", {"approach": "pwa"})


# ----------------------------------------------------------------------------- the CLI


@pytest.fixture
def trace(tmp_path: Path) -> Path:
    lines = [f"{i} {i * 60} -1 {600 + 60 * i} {1 + i % 8} -1 -1 {1 + i % 8} 3600 -1 1 1 1 -1 "
             "1 -1 -1 -1" for i in range(1, 41)]
    path = tmp_path / "rigid.swf"
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize("name", ALL)
def test_simulate_runs_every_policy_on_any_platform(name: str, trace: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", "--policy", name, "--platform", "16", "--workload", str(trace),
                 "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["policy"] == name and summary["jobs"] == summary["completed"] == 40
    assert summary["platform"] == "16"
    assert summary["approach"] == ("pra" if name in ("fpsma", "egs", "equipartition") else None)


def test_simulate_defaults_keep_their_summary_keys(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", "--workload", "wm", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert list(summary)[-4:] == ["approach", "policy", "workload", "seed"]
    assert "platform" not in summary and "policy_options" not in summary
    assert (summary["approach"], summary["policy"]) == ("pra", "fpsma")


def test_simulate_approach_shorthand_equals_the_option(capsys: pytest.CaptureFixture[str]
                                                       ) -> None:
    assert main(["simulate", "--workload", "wm-prime", "--approach", "pwa", "--json"]) == 0
    short = json.loads(capsys.readouterr().out)
    assert main(["simulate", "--workload", "wm-prime", "--policy-option", "approach=pwa",
                 "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == short
    assert short["approach"] == "pwa"


def test_simulate_records_other_options(trace: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", "--policy", "acds", "--policy-option", "quantum=30",
                 "--platform", "16", "--workload", str(trace), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["policy_options"] == {"quantum": 30}


@pytest.mark.parametrize(("argv", "message"), [
    (["--policy", "nosuch"], "unknown policy 'nosuch'; valid: acds, dmr, easy"),
    (["--policy", "dmr", "--policy-option", "foo=1"], "policy dmr has no option foo"),
    (["--policy", "acds", "--policy-option", "nonsense=1"], "unknown option(s) nonsense"),
    (["--policy-option", "novalue"], "write KEY=VALUE"),
    (["--platform", "0"], "at least one node"),
    (["--platform", "nosuch.toml"], "neither das3, a node count nor a clusters config"),
])
def test_simulate_refuses_bad_policies_and_platforms(argv: list[str], message: str,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_manager_run_refuses_an_unknown_policy_before_creating_anything(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "c.toml"
    config.write_text('[policy]\nname = "acds"\n[policy.options]\nbogus = 1\n' + SITES)
    out = tmp_path / "out"
    assert main(["manager", "run", "--config", str(config), "--out", str(out)]) == 2
    assert "unknown option(s) bogus" in capsys.readouterr().err
    assert main(["manager", "run", "--config", str(config), "--out", str(out),
                 "--policy", "nosuch"]) == 2
    assert "unknown policy 'nosuch'" in capsys.readouterr().err
    assert not out.exists()


def test_policies_list_json(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["policies", "list", "--json"]) == 0
    listed = {p["name"]: p for p in json.loads(capsys.readouterr().out)}
    assert set(ALL) <= set(listed)
    assert listed["fpsma"]["options"] == {"approach": "pra", "grow_threshold": 1.0,
                                          "grow_cap": 0.0}  # issue 39: a new option, off
    assert listed["easy-dmr"]["options"] == {"multiples": True, "pooled": False}
    assert listed["acds"]["options"] is None
    assert listed["fcfs"]["description"].startswith("Strict FCFS")
