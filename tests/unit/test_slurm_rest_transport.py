"""The REST transport's configuration and token handling (no server: see the contract
suite's ``slurm-rest-testbed-*`` drivers for the real slurmrestd)."""

from __future__ import annotations

import base64
import json
import os
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest

from malleable.adapters.slurm.rest import RestCtl, TokenSource
from malleable.adapters.slurm.sites import ctl_for
from malleable.config import load_config, parse_config
from malleable.errors import ExternalError, InputError
from malleable.kinds import commands


def _jwt(exp: float, user: str = "malleable") -> str:
    def part(doc: dict[str, object]) -> str:
        return base64.urlsafe_b64encode(json.dumps(doc).encode()).decode().rstrip("=")

    return f"{part({'alg': 'HS256'})}.{part({'exp': int(exp), 'sun': user})}.c2ln"


def test_a_rest_site_is_configured_without_ssh(tmp_path: Path) -> None:
    token = tmp_path / "vu.jwt"
    token.write_text(f"SLURM_JWT={_jwt(time.time() + 3600)}\n")
    path = tmp_path / "c.toml"
    path.write_text('[ssh]\nuser = "x"\nkey = "nokey"\nknown_hosts = "nofile"\n'
                    '[clusters.vu]\ntransport = "rest"\nurl = "http://127.0.0.1:6820"\n'
                    'token_file = "vu.jwt"\npartition = "batch"\n')
    site = load_config(path).site("vu")  # the [ssh] defaults' files are not needed
    assert site.ssh is None and site.rest is not None
    assert site.rest.token_file == token and site.rest.url == "http://127.0.0.1:6820"
    ctl = commands(site)  # the registry picks Slurm's rest transport
    assert isinstance(ctl, RestCtl) and ctl.partition == "batch"
    assert ctl.user == "malleable"  # from the token's `sun` claim, no request made
    with pytest.raises(InputError, match="reached through slurmrestd"):
        ctl_for(site)  # the SSH builder: a REST site has no SSH
    with pytest.raises(InputError, match="kind 'oar' has no transport 'rest'; valid: slurm"):
        commands(replace(site, kind="oar"))


@pytest.mark.parametrize(("table", "message"), [
    ('transport = "rest"\ntoken_file = "t"', "url: missing"),
    ('transport = "rest"\nurl = "ftp://x"\ntoken_file = "t"', "not an http"),
    ('transport = "rest"\nurl = "http://x"', "exactly one of token_file"),
    ('transport = "rest"\nurl = "http://x"\ntoken_file = "t"\ntoken_command = ["a"]',
     "exactly one"),
    ('transport = "rest"\nurl = "http://x"\ntoken_command = "scontrol token"', "list of str"),
    ('transport = "rest"\nurl = "http://x"\ntoken_file = "t"\nhost = "h"', "no SSH is used"),
    ('transport = "rest"\nkind = "oar"\nurl = "http://x"\ntoken_file = "t"', "Slurm sites"),
    ('transport = "carrier-pigeon"', "unknown transport"),
    ('url = "http://x"', "only for transport"),
])
def test_bad_rest_tables_are_refused(table: str, message: str) -> None:
    import tomllib

    doc = tomllib.loads(f"[clusters.vu]\n{table}\n")
    with pytest.raises(InputError, match=message):
        parse_config(doc)


def test_a_missing_token_file_is_refused_at_load(tmp_path: Path) -> None:
    path = tmp_path / "c.toml"
    path.write_text('[clusters.vu]\ntransport = "rest"\nurl = "http://x"\n'
                    'token_file = "absent.jwt"\n')
    with pytest.raises(InputError, match=r"absent\.jwt: no such file"):
        load_config(path)


def test_a_token_file_is_read_again_when_it_changes_or_nears_expiry(tmp_path: Path) -> None:
    now = [1000.0]
    path = tmp_path / "t.jwt"
    first, second = _jwt(5000), _jwt(9000, "other")
    path.write_text(first)
    source = TokenSource(file=path, clock=lambda: now[0])
    assert source.get() == first and source.user() == "malleable"
    path.write_text(second + "\n")
    os.utime(path, ns=(time.time_ns(), time.time_ns() + 10**9))
    assert source.get() == second and source.user() == "other"
    now[0] = 8990.0  # within a minute of the expiry: read again (the same: still valid)
    assert source.get() == second
    now[0] = 9001.0
    with pytest.raises(ExternalError, match="expired 1 s ago: renew it"):
        source.get()


def test_a_token_command_is_run_again_before_expiry(tmp_path: Path) -> None:
    now = [1000.0]
    counter = tmp_path / "n"
    script = (f"import pathlib,sys; p=pathlib.Path({str(counter)!r}); "
              "n=int(p.read_text()) if p.exists() else 0; p.write_text(str(n+1)); "
              f"print('SLURM_JWT=' + {[_jwt(1050), _jwt(5000)]!r}[min(n, 1)])")
    source = TokenSource(command=[sys.executable, "-c", script], clock=lambda: now[0])
    assert source.get() == _jwt(1050)
    assert source.get() == _jwt(5000)  # the first was within RENEW_BEFORE of its expiry
    assert source.get() == _jwt(5000) and counter.read_text() == "2"
    bad = TokenSource(command=[sys.executable, "-c", "import sys; sys.exit(3)"])
    with pytest.raises(ExternalError, match="failed \\(exit 3\\)"):
        bad.get()
    garbage = TokenSource(command=[sys.executable, "-c", "print('; rm -rf /')"])
    with pytest.raises(ExternalError, match="expected one JWT"):
        garbage.get()


def test_an_unreachable_server_is_an_external_error(tmp_path: Path) -> None:
    path = tmp_path / "t.jwt"
    path.write_text(_jwt(time.time() + 3600))
    doc = {"clusters": {"vu": {"transport": "rest", "url": "http://127.0.0.1:9",
                               "token_file": str(path)}}}
    ctl = commands(parse_config(doc).site("vu"))
    assert isinstance(ctl, RestCtl)
    ctl.client.retries = 0
    with pytest.raises(ExternalError, match=r"slurmrestd http://127\.0\.0\.1:9"):
        ctl.poll()
    ctl.runner.close()
