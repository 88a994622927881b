"""``manager run`` with a REST site: no Slurm command is needed on this machine."""

from __future__ import annotations

import pytest

from malleable.config import parse_config
from malleable.errors import ExternalError
from malleable.service import check_local_commands


def test_a_rest_site_needs_no_local_commands(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", "/nonexistent")
    rest = parse_config({"clusters": {"vu": {"transport": "rest", "url": "http://x:6820",
                                             "token_command": ["true"]}}})
    check_local_commands(rest.sites)  # slurmrestd: nothing runs here
    local = parse_config({"clusters": {"vu": {}}})
    with pytest.raises(ExternalError, match="sinfo, squeue, sbatch, scontrol, scancel"):
        check_local_commands(local.sites)
