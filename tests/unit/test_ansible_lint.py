"""ansible/: lint-clean (production profile), playbooks that parse with both example
inventories, and role argument specs that reject a wrong variable with its name."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ANSIBLE = Path(__file__).resolve().parents[2] / "ansible"
INVENTORIES = ("single", "das3")
ROLES = ("slurm_site", "slurm_malleable", "malleable_manager", "malleable_client")


def _tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.fail(f"{name} is missing: pip install -e '.[dev]' (it brings ansible and "
                    "ansible-lint)")
    return path


def _run(argv: list[str], timeout: float = 600) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "ANSIBLE_NOCOLOR": "1", "NO_COLOR": "1", "ANSIBLE_FORCE_COLOR": "0",
           "ANSIBLE_ROLES_PATH": str(ANSIBLE / "roles")}
    return subprocess.run(argv, cwd=ANSIBLE, capture_output=True, text=True, timeout=timeout,
                          env=env, check=False)


def test_layout_has_each_role_with_defaults_argument_spec_and_readme() -> None:
    for role in ROLES:
        for part in ("defaults/main.yml", "meta/argument_specs.yml", "README.md",
                     "tasks/main.yml"):
            assert (ANSIBLE / "roles" / role / part).is_file(), f"{role}/{part}"
    for name in ("site.yml", "malleable.yml", "README.md"):
        assert (ANSIBLE / name).is_file()


@pytest.mark.slow
def test_ansible_lint_production_profile_is_clean() -> None:
    result = _run([_tool("ansible-lint"), "--nocolor", "--offline"])
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    assert "Profile 'production' was required, and it passed" in result.stderr + result.stdout


@pytest.mark.parametrize("inventory", INVENTORIES)
@pytest.mark.parametrize("playbook", ["site.yml", "malleable.yml"])
def test_playbook_syntax_with_example_inventory(playbook: str, inventory: str) -> None:
    result = _run([_tool("ansible-playbook"), "--syntax-check", "-i",
                   f"inventories/{inventory}/hosts.yml", playbook], timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr


def test_wrong_variable_fails_with_its_name(tmp_path: Path) -> None:
    play = tmp_path / "play.yml"
    play.write_text(
        "- hosts: localhost\n  gather_facts: false\n  roles:\n"
        "    - role: slurm_malleable\n      vars:\n"
        "        slurm_malleable_operator_level: Boss\n")
    result = _run([_tool("ansible-playbook"), "-i", "localhost,", "-c", "local",
                   str(play)], timeout=120)
    out = result.stdout + result.stderr
    assert result.returncode != 0
    assert "slurm_malleable_operator_level" in out and "Operator" in out, out[-3000:]
