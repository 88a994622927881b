"""Secrets generated at bring-up, known_hosts, and the clusters config."""

from __future__ import annotations

import stat
import tomllib
from pathlib import Path

import paramiko
import pytest

from malleable.testbed import secrets
from malleable.testbed.clusters import render_clusters_toml
from malleable.testbed.info import SiteEndpoint


def test_generate_writes_private_files_readable_only_by_owner(tmp_path: Path) -> None:
    d = tmp_path / "secrets"
    secrets.generate(d, "t")
    assert stat.S_IMODE(d.stat().st_mode) == 0o711
    for name in ("munge.key", "dbpass", "ssh_host_ed25519_key", "id_ed25519", "jwt_hs256.key"):
        assert stat.S_IMODE((d / name).stat().st_mode) == 0o600, name
    assert len((d / "munge.key").read_bytes()) == 1024
    assert len((d / "jwt_hs256.key").read_bytes()) == 32
    key = paramiko.Ed25519Key.from_private_key_file(str(d / "id_ed25519"))
    assert (d / "id_ed25519.pub").read_text().split()[1] == key.get_base64()


def test_every_bring_up_makes_new_secrets(tmp_path: Path) -> None:
    secrets.generate(tmp_path / "a", "t")
    secrets.generate(tmp_path / "b", "t")
    for name in ("munge.key", "id_ed25519", "ssh_host_ed25519_key", "dbpass", "jwt_hs256.key"):
        assert (tmp_path / "a" / name).read_bytes() != (tmp_path / "b" / name).read_bytes()


def test_known_hosts_pins_the_host_key_for_paramiko(tmp_path: Path) -> None:
    secrets.generate(tmp_path, "t")
    path = secrets.write_known_hosts(tmp_path, ["vu-ctl", "172.18.0.2", "[127.0.0.1]:32768",
                                                "vu-ctl", ""])
    keys = paramiko.HostKeys(str(path))
    host = paramiko.Ed25519Key.from_private_key_file(str(tmp_path / "ssh_host_ed25519_key"))
    for name in ("vu-ctl", "172.18.0.2", "[127.0.0.1]:32768"):
        entry = keys.lookup(name)
        assert entry is not None and entry["ssh-ed25519"].get_base64() == host.get_base64()
    assert keys.lookup("[127.0.0.1]:22") is None
    assert path.read_text().count("vu-ctl") == 1


def test_known_hosts_needs_a_name() -> None:
    with pytest.raises(ValueError):
        secrets.known_hosts_line(["", ""], "ssh-ed25519 AAAA")


def test_clusters_toml_round_trips() -> None:
    ep = SiteEndpoint("vu", "vu", "vu-ctl", "127.0.0.1", 32768, "172.18.0.2", "malleable",
                      "/state/t/secrets/id_ed25519", '/state/with "quote"/known_hosts', 4, "batch")
    doc = tomllib.loads(render_clusters_toml("t", [ep]))
    assert doc["clusters"]["vu"] == {
        "kind": "slurm", "slurm_cluster": "vu", "partition": "batch", "nodes": 4,
        "host": "127.0.0.1", "port": 32768, "address": "172.18.0.2", "user": "malleable",
        "key": "/state/t/secrets/id_ed25519", "known_hosts": '/state/with "quote"/known_hosts',
        "controller": "vu-ctl", "host_key_alias": "vu-ctl"}


def test_clusters_toml_of_a_rest_site_has_no_ssh_key() -> None:
    from malleable.config import parse_config

    ep = SiteEndpoint("vu", "vu", "vu-ctl", "127.0.0.1", 32768, "172.18.0.2", "malleable",
                      "/state/t/secrets/id_ed25519", "/state/t/secrets/known_hosts", 4, "batch",
                      rest_url="http://127.0.0.1:32769")
    text = render_clusters_toml("t", [ep], {"vu": "/state/t/secrets/rest-vu.token"})
    doc = tomllib.loads(text)
    assert doc["clusters"]["vu"] == {
        "kind": "slurm", "transport": "rest", "url": "http://127.0.0.1:32769",
        "token_file": "/state/t/secrets/rest-vu.token", "slurm_cluster": "vu",
        "partition": "batch", "nodes": 4, "controller": "vu-ctl"}
    site = parse_config(doc).site("vu")
    assert site.ssh is None and site.rest is not None and "id_ed25519" not in text
