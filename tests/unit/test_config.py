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
known_hosts = "ABS/known_hosts"

[clusters.vu]
host = "127.0.0.1"
port = 40022
nodes = 85
partition = "batch"

[clusters.uva]
host = "127.0.0.1"
port = 40023
user = "alice"
reserve = 2
speed = 1.5

[clusters.local]
"""


def _write(tmp_path: Path, text: str) -> Path:
    """The config in tmp_path, ABS standing for tmp_path, with the key files it names
    (load_config checks that they exist)."""
    path = tmp_path / "clusters.toml"
    path.write_text(text.replace("ABS", str(tmp_path)))
    for name in ("keys/id_ed25519", "known_hosts", "secrets/id_ed25519", "secrets/known_hosts"):
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text("")
    return path


def test_sites_in_file_order_with_defaults_and_overrides(tmp_path: Path) -> None:
    config = load_config(_write(tmp_path, GOOD.replace("[clusters.local]\n", "")))
    vu, uva = config.sites
    assert (vu.name, uva.name) == ("vu", "uva")
    assert vu.ssh is not None and uva.ssh is not None
    assert (vu.ssh.host, vu.ssh.port, vu.ssh.user) == ("127.0.0.1", 40022, "root")
    assert vu.ssh.key == tmp_path / "keys" / "id_ed25519"  # relative to the file
    assert vu.ssh.known_hosts == tmp_path / "known_hosts"
    assert (vu.nodes, vu.partition, vu.reserve, vu.speed) == (85, "batch", 0, 1.0)
    assert (uva.ssh.user, uva.reserve, uva.speed, uva.nodes) == ("alice", 2, 1.5, None)
    assert config.site("uva") is uva
    with pytest.raises(dataclasses.FrozenInstanceError):
        vu.reserve = 3  # type: ignore[misc]


def test_a_site_without_host_runs_locally() -> None:
    config = parse_config({"clusters": {"here": {"partition": "debug"}}})
    assert config.sites[0].ssh is None


def test_a_finish_file_is_a_sites_option_none_by_default() -> None:
    config = parse_config({"clusters": {"a": {"finish_file": "/home/malleable/end"}, "b": {}}})
    assert [s.finish_file for s in config.sites] == ["/home/malleable/end", None]


def test_a_host_in_the_ssh_defaults_applies_to_every_site() -> None:
    data = {"ssh": {"host": "h", "user": "u", "key": "/k", "known_hosts": "/kh"},
            "clusters": {"a": {"port": 2201}}}
    site = parse_config(data).sites[0]
    assert site.ssh is not None and (site.ssh.host, site.ssh.port) == ("h", 2201)


@pytest.mark.parametrize(("text", "message"), [
    ("[clusters.vu]\nhots = 'x'\n", "clusters.vu.hots: unknown key; valid keys: kind, host, port"),
    ("[site.vu]\n", "site: unknown key; valid keys: clusters, ssh"),
    ("[ssh]\nusr = 'x'\n[clusters.a]\n", "ssh.usr: unknown key"),
    ("[clusters]\n", "no clusters"),
    ("x = 1\n", "x: unknown key"),
    ("[clusters.vu]\nhost = 'h'\nuser = 'u'\nknown_hosts = '/k'\n", "clusters.vu.key: missing"),
    ("[clusters.vu]\nhost = 'h'\nport = 'x'\nuser='u'\nkey='/k'\nknown_hosts='/k'\n",
     "clusters.vu.port: must be an integer in [1, 65535], not 'x'"),
    ("[clusters.vu]\nreserve = -1\n", "clusters.vu.reserve: must be an integer >= 0"),
    ("[clusters.vu]\nnodes = true\n", "clusters.vu.nodes: must be an integer"),
    ("[clusters.vu]\nspeed = 0\n", "clusters.vu.speed: must be a positive number"),
    ("[clusters.vu]\npartition = ''\n", "clusters.vu.partition: must be a non-empty string"),
    ("clusters = 3\n", "clusters: must be a table"),
    ("[clusters.vu]\nkind = 'pbs'\n", "clusters.vu.kind: unknown kind 'pbs'; valid: slurm, oar"),
    ("[clusters.vu]\nfinish_file = 'end'\n", "clusters.vu.finish_file: 'end' is not an absolute"),
    ("[clusters.vu]\nfinish_file = 1\n", "clusters.vu.finish_file: must be a non-empty string"),
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


TESTBED = '''# Clusters of the malleable testbed 'default'.
# Regenerated at every bring-up: ports and keys change.

[clusters.vu]
kind = "slurm"
slurm_cluster = "vu"
partition = "batch"
nodes = 85
host = "127.0.0.1"
port = 49153
address = "172.19.0.7"
user = "malleable"
key = "ABS/secrets/id_ed25519"
known_hosts = "ABS/secrets/known_hosts"
controller = "vu-ctl"
'''


def test_reads_what_testbed_config_prints(tmp_path: Path) -> None:
    site = load_config(_write(tmp_path, TESTBED)).site("vu")
    assert site.ssh is not None
    assert (site.ssh.user, site.ssh.port, site.partition, site.nodes) == (
        "malleable", 49153, "batch", 85)
    assert (site.kind, site.slurm_cluster, site.controller, site.address) == (
        "slurm", "vu", "vu-ctl", "172.19.0.7")


SITE = ("[clusters.vu]\nhost = 'h'\nuser = 'u'\nkey = 'keys/id_ed25519'\n"
        "known_hosts = 'known_hosts'\n")


@pytest.mark.parametrize(("text", "message"), [
    (SITE + "port = 65536\n", "clusters.vu.port: must be an integer in [1, 65535], not 65536"),
    (SITE + "port = 99999999\n", "clusters.vu.port: must be an integer in [1, 65535]"),
    (SITE + "port = 0\n", "clusters.vu.port: must be an integer in [1, 65535], not 0"),
    (SITE + "port = -22\n", "clusters.vu.port: must be an integer in [1, 65535]"),
    (SITE + "port = 22.5\n", "clusters.vu.port: must be an integer in [1, 65535], not 22.5"),
    ("[ssh]\nport = 70000\n" + SITE, "clusters.vu.port: must be an integer in [1, 65535]"),
    (SITE.replace("keys/id_ed25519", "keys/absent"),
     "clusters.vu.key: ABS/keys/absent: no such file"),
    (SITE.replace("'known_hosts'", "'nope/known_hosts'"),
     "clusters.vu.known_hosts: ABS/nope/known_hosts: no such file"),
    (SITE.replace("keys/id_ed25519", "keys"), "clusters.vu.key: ABS/keys: no such file"),
    ("[ssh]\nkey = '/no/such/key'\n" + SITE.replace("key = 'keys/id_ed25519'\n", ""),
     "clusters.vu.key: /no/such/key: no such file (the path may come from the [ssh] table)"),
])
def test_bad_ports_and_missing_key_files_are_refused_at_load(
        tmp_path: Path, text: str, message: str) -> None:
    path = _write(tmp_path, text)
    with pytest.raises(InputError) as info:
        load_config(path)
    assert str(info.value).startswith(f"{path}: " + message.replace("ABS", str(tmp_path)))


def test_port_65535_and_existing_key_files_load(tmp_path: Path) -> None:
    site = load_config(_write(tmp_path, SITE + "port = 65535\n")).site("vu")
    assert site.ssh is not None and site.ssh.port == 65535


@pytest.mark.parametrize("data", [b"[clusters.vu]\nnodes = 3 # caf\xe9\n", b"\xff\xfe[\x00",
                                  b"\x80", b"[clusters.\xc3]\n"])
def test_a_config_that_is_not_utf8_is_bad_input(tmp_path: Path, data: bytes) -> None:
    path = tmp_path / "c.toml"
    path.write_bytes(data)
    with pytest.raises(InputError) as info:
        load_config(path)
    assert str(info.value).startswith(f"{path}: not UTF-8 text (byte 0x")
    assert info.value.exit_code == 2


def test_a_config_with_a_byte_order_mark_loads(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_bytes("\ufeff[clusters.vu]\nnodes = 3\n".encode())
    assert load_config(path).site("vu").nodes == 3


def test_the_cli_reports_a_latin1_config_in_one_line(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from malleable.cli import main

    path = tmp_path / "c.toml"
    path.write_bytes(b"# r\xe9sum\xe9\n[clusters.vu]\n")
    assert main(["resize", "--config", str(path), "--site", "vu", "1", "4"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"malleable: error: {path}: not UTF-8 text") and err.count("\n") == 1
