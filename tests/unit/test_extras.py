"""Issue 40: a command whose optional extra is missing stops with one line naming it.

The library of each extra is hidden from a fresh interpreter (``sys.modules[NAME] = None``
makes its import fail as if it were not installed); the command must exit 3 with one line
``... needs NAME, which is not installed: pip install 'malleable[EXTRA]'`` and no traceback.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import malleable
from malleable.errors import MissingExtraError, require_extra

SRC = str(Path(malleable.__file__).parents[1])


def _run_without(module: str, argv: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    code = (f"import sys\nsys.modules[{module!r}] = None\n"
            "from malleable.cli import main\nsys.exit(main(sys.argv[1:]))")
    return subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True,
                          timeout=120, check=False, cwd=cwd, env={**os.environ, "PYTHONPATH": SRC})


def _one_line(done: subprocess.CompletedProcess[str], module: str, extra: str) -> None:
    assert done.returncode == 3, (done.returncode, done.stderr)
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert f"needs {module}, which is not installed: pip install 'malleable[{extra}]'" in lines[0]


def test_ssh_to_a_site_without_paramiko_names_the_service_extra(tmp_path: Path) -> None:
    (tmp_path / "key").write_text("")
    (tmp_path / "known_hosts").write_text("")
    (tmp_path / "c.toml").write_text(
        '[clusters.vu]\nhost = "vu.example.org"\nuser = "u"\n'
        f'key = "{tmp_path / "key"}"\nknown_hosts = "{tmp_path / "known_hosts"}"\n')
    done = _run_without("paramiko", ["resize", "--config", "c.toml", "--site", "vu", "1", "2"],
                        tmp_path)
    _one_line(done, "paramiko", "service")


def test_the_site_service_without_prometheus_client_names_the_service_extra(
        tmp_path: Path) -> None:
    (tmp_path / "m.toml").write_text(f'[service]\nstate = "{tmp_path / "s.sqlite"}"\n'
                                     "[clusters.vu]\n")
    done = _run_without("prometheus_client", ["manager", "serve", "--config", "m.toml"],
                        tmp_path)
    _one_line(done, "prometheus_client", "service")
    assert not (tmp_path / "s.sqlite").exists()


def test_the_testbed_without_cryptography_names_the_testbed_extra(tmp_path: Path) -> None:
    done = _run_without("cryptography", ["testbed", "up", "--name", "fhpkg-never"], tmp_path)
    _one_line(done, "cryptography", "testbed")


def test_a_simulation_needs_none_of_the_extras(tmp_path: Path) -> None:
    code = ("import sys\nfor m in ('paramiko', 'prometheus_client', 'cryptography', 'mpi4py'):\n"
            "    sys.modules[m] = None\nfrom malleable.cli import main\n"
            "sys.exit(main(sys.argv[1:]))")
    done = subprocess.run([sys.executable, "-c", code, "simulate", "--platform", "16",
                           "--policy", "fcfs", "--json"], capture_output=True, text=True,
                          timeout=120, check=False, cwd=tmp_path, env={**os.environ,
                                                                        "PYTHONPATH": SRC})
    assert done.returncode == 0, done.stderr


def test_require_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    require_extra("json", "service", "x")  # present: nothing
    monkeypatch.setitem(sys.modules, "paramiko", None)
    with pytest.raises(MissingExtraError, match=r"ssh h needs paramiko.*malleable\[service\]"):
        require_extra("paramiko", "service", "ssh h")
    assert MissingExtraError.exit_code == 3
