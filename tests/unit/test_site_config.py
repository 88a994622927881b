"""The site service's config file (manager.toml)."""

from __future__ import annotations

from pathlib import Path

import pytest

from malleable.errors import InputError
from malleable.site.config import load_service_config, parse_service_config

GOOD = """
[service]
state = "state/state.sqlite"
poll = 2.5
metrics = "127.0.0.1:0"
max_tries = 3
copies_grace = 12

[policy]
name = "egs"
[policy.options]
approach = "pwa"

[clusters.vu]
reserve = 2
[clusters.leiden]
"""


def test_good_config(tmp_path: Path) -> None:
    path = tmp_path / "manager.toml"
    path.write_text(GOOD)
    config = load_service_config(path)
    assert config.state == tmp_path / "state" / "state.sqlite"
    assert config.poll == 2.5 and config.metrics == ("127.0.0.1", 0) and config.max_tries == 3
    assert [s.name for s in config.clusters.sites] == ["vu", "leiden"]
    assert config.clusters.sites[0].reserve == 2
    assert config.clusters.policy is not None and config.clusters.policy.name == "egs"
    assert config.status_path == tmp_path / "state" / "state.sqlite.status.json"
    assert config.copies_grace == 12.0


def test_copies_grace_defaults_to_30_s() -> None:
    config = parse_service_config({"service": {"state": "s"}, "clusters": {"a": {}}})
    assert config.copies_grace == 30.0


@pytest.mark.parametrize(("doc", "message"), [
    ({"service": {"state": "s"}, "clusters": {"a": {}}, "polcy": {}},
     "polcy: unknown key; valid keys: service, policy, ssh, clusters"),
    ({"service": {"state": "s", "pol": 1}, "clusters": {"a": {}}},
     "service.pol: unknown key; valid keys: state, poll, metrics, status, account, max_tries"),
    ({"clusters": {"a": {}}}, "service: missing table"),
    ({"service": {}, "clusters": {"a": {}}}, "service.state: missing"),
    ({"service": {"state": "s", "poll": 0}, "clusters": {"a": {}}}, "service.poll"),
    ({"service": {"state": "s", "metrics": "nope"}, "clusters": {"a": {}}}, "service.metrics"),
    ({"service": {"state": "s", "max_tries": -1}, "clusters": {"a": {}}}, "service.max_tries"),
    ({"service": {"state": "s", "copies_grace": -1}, "clusters": {"a": {}}},
     "service.copies_grace: must be a number of seconds in [0, 3600], not -1"),
    ({"service": {"state": "s", "copies_grace": 3601}, "clusters": {"a": {}}},
     "service.copies_grace: must be a number of seconds in [0, 3600], not 3601"),
    ({"service": {"state": "s", "copies_grace": "30"}, "clusters": {"a": {}}},
     "service.copies_grace: must be a number of seconds in [0, 3600], not '30'"),
    ({"service": {"state": "s", "copies_grace": True}, "clusters": {"a": {}}},
     "service.copies_grace"),
    ({"service": {"state": "s"}, "clusters": {"a": {"reserv": 1}}},
     "clusters.a.reserv: unknown key"),
])
def test_bad_configs_name_the_key(doc: dict[str, object], message: str) -> None:
    with pytest.raises(InputError) as caught:
        parse_service_config(doc, "manager.toml")
    assert message in str(caught.value)
