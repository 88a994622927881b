"""The clusters config: TOML into frozen dataclasses, unknown keys refused with their path."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from malleable.config import load_config, parse_config
from malleable.errors import InputError

GOOD = """
[ssh]
user = "root"
key = "keys/id_ed25519"
known_hosts = "/abs/known_hosts"

[sites.vu]
host = "127.0.0.1"
port = 40022
nodes = 85
partition = "batch"

[sites.uva]
host = "127.0.0.1"
port = 40023
user = "alice"
reserve = 2
speed = 1.5

[sites.local]
"""


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "clusters.toml"
    path.write_text(text)
    return path


def test_sites_in_file_order_with_defaults_and_overrides(tmp_path: Path) -> None:
    config = load_config(_write(tmp_path, GOOD.replace("[sites.local]\n", "")))
    vu, uva = config.sites
    assert (vu.name, uva.name) == ("vu", "uva")
    assert vu.ssh is not None and uva.ssh is not None
    assert (vu.ssh.host, vu.ssh.port, vu.ssh.user) == ("127.0.0.1", 40022, "root")
    assert vu.ssh.key == tmp_path / "keys" / "id_ed25519"  # relative to the file
    assert vu.ssh.known_hosts == Path("/abs/known_hosts")
    assert (vu.nodes, vu.partition, vu.reserve, vu.speed) == (85, "batch", 0, 1.0)
    assert (uva.ssh.user, uva.reserve, uva.speed, uva.nodes) == ("alice", 2, 1.5, None)
    assert config.site("uva") is uva
    with pytest.raises(dataclasses.FrozenInstanceError):
        vu.reserve = 3  # type: ignore[misc]


def test_a_site_without_host_runs_locally() -> None:
    config = parse_config({"sites": {"here": {"partition": "debug"}}})
    assert config.sites[0].ssh is None


def test_a_host_in_the_ssh_defaults_applies_to_every_site() -> None:
    data = {"ssh": {"host": "h", "user": "u", "key": "/k", "known_hosts": "/kh"},
            "sites": {"a": {"port": 2201}}}
    site = parse_config(data).sites[0]
    assert site.ssh is not None and (site.ssh.host, site.ssh.port) == ("h", 2201)


@pytest.mark.parametrize(("text", "message"), [
    ("[sites.vu]\nhots = 'x'\n", "sites.vu.hots: unknown key; valid keys: host, port"),
    ("[site.vu]\n", "site: unknown key; valid keys: sites, ssh"),
    ("[ssh]\nusr = 'x'\n[sites.a]\n", "ssh.usr: unknown key"),
    ("[sites]\n", "no sites"),
    ("x = 1\n", "x: unknown key"),
    ("[sites.vu]\nhost = 'h'\nuser = 'u'\nknown_hosts = '/k'\n", "sites.vu.key: missing"),
    ("[sites.vu]\nhost = 'h'\nport = 'x'\nuser='u'\nkey='/k'\nknown_hosts='/k'\n",
     "sites.vu.port: must be an integer >= 1"),
    ("[sites.vu]\nreserve = -1\n", "sites.vu.reserve: must be an integer >= 0"),
    ("[sites.vu]\nnodes = true\n", "sites.vu.nodes: must be an integer"),
    ("[sites.vu]\nspeed = 0\n", "sites.vu.speed: must be a positive number"),
    ("[sites.vu]\npartition = ''\n", "sites.vu.partition: must be a non-empty string"),
    ("sites = 3\n", "sites: must be a table"),
    ("[sites\n", "not valid TOML"),
])
def test_bad_input_names_the_file_and_the_key(tmp_path: Path, text: str, message: str) -> None:
    path = _write(tmp_path, text)
    with pytest.raises(InputError) as info:
        load_config(path)
    assert str(info.value).startswith(f"{path}: ")
    assert message in str(info.value)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="cannot read config"):
        load_config(tmp_path / "absent.toml")


def test_unknown_site_lists_the_valid_ones(tmp_path: Path) -> None:
    config = load_config(_write(tmp_path, GOOD))
    with pytest.raises(InputError, match=r"no site 'delft'.*valid: vu, uva, local"):
        config.site("delft")
