"""The site service's configuration for unit tests on fake sites: OAR sites by name (each
reached at ``NAME-ctl``), Slurm sites with the defaults, FPSMA with the approach asked."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from malleable.site.config import ServiceConfig, parse_service_config

ACCOUNT = "malleable"
"""The service account the fake sites see."""


def service_config(tmp_path: Path, oar: Sequence[str] = ("grid",), slurm: Sequence[str] = (),
                   approach: str = "pra", channel: str = "") -> ServiceConfig:
    clusters: dict[str, dict[str, str]] = {n: {"kind": "oar", "host": f"{n}-ctl"} for n in oar}
    clusters.update({n: {} for n in slurm})
    service: dict[str, Any] = {"state": str(tmp_path / "state.sqlite"), "poll": 1.0}
    if channel:
        service["channel"] = channel
    doc = {"service": service,
           "policy": {"name": "fpsma", "options": {"approach": approach}},
           "ssh": {"user": ACCOUNT, "key": "id", "known_hosts": "known"},
           "clusters": clusters}
    return parse_service_config(doc, str(tmp_path / "manager.toml"), tmp_path)
