"""The ``malleable_manager`` role's ``manager.toml`` with a REST site, rendered by Ansible's
own template module on this machine (no testbed, no container) and read back by the
loader the role validates it with."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from malleable.site.config import load_service_config

ROLE = Path(__file__).resolve().parents[2] / "ansible" / "roles" / "malleable_manager"


def _render(tmp_path: Path, sites: list[dict[str, object]]) -> Path:
    ansible = shutil.which("ansible")
    if ansible is None:
        pytest.fail("ansible is missing: pip install -e '.[dev]'")
    variables = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())
    variables.update(malleable_manager_sites=sites,
                     malleable_manager_state_dir=str(tmp_path / "state"),
                     ansible_python_interpreter=sys.executable)
    (tmp_path / "vars.json").write_text(json.dumps(variables))
    out = tmp_path / "manager.toml"
    env = {**os.environ, "ANSIBLE_NOCOLOR": "1", "ANSIBLE_LOCALHOST_WARNING": "False",
           "ANSIBLE_INVENTORY_UNPARSED_WARNING": "False"}
    done = subprocess.run(
        [ansible, "localhost", "-i", "localhost,", "-c", "local", "-m",
         "ansible.builtin.template", "-a",
         f"src={ROLE / 'templates' / 'manager.toml.j2'} dest={out} mode=0600",
         "-e", f"@{tmp_path / 'vars.json'}"],
        capture_output=True, text=True, timeout=180, env=env, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    return out


def test_the_role_renders_a_rest_site_without_any_ssh_key(tmp_path: Path) -> None:
    token = tmp_path / "vu.jwt"  # made at run time, as the site's renewal writes it
    token.write_text("x\n")
    token.chmod(0o600)
    out = _render(tmp_path, [
        {"name": "vu", "transport": "rest", "url": "https://vu-ctl.example:6820",
         "token_file": str(token), "tls_ca": str(token), "partition": "batch"},
        {"name": "uva", "transport": "rest", "url": "http://127.0.0.1:6820",
         "token_command": ["sudo", "-n", "/usr/local/sbin/uva-token"],
         "workdir": "/var/lib/malleable/jobs"},
    ])
    text = out.read_text()
    assert "key" not in text.replace("token", "")  # no SSH key, no [ssh] table
    config = load_service_config(out)  # what the role's `validate` runs
    vu, uva = config.clusters.site("vu"), config.clusters.site("uva")
    assert vu.ssh is None and vu.rest is not None and vu.partition == "batch"
    assert (vu.rest.url, vu.rest.token_file, vu.rest.verify) == (
        "https://vu-ctl.example:6820", token, str(token))
    assert uva.rest is not None and uva.rest.token_command == (
        "sudo", "-n", "/usr/local/sbin/uva-token")
    assert uva.rest.workdir == "/var/lib/malleable/jobs" and uva.rest.token_file is None
