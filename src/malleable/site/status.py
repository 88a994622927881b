"""The site service's status file: written atomically each cycle, read by ``manager
status`` (with whether the service still runs and the journal's resizes in flight)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from malleable.errors import InputError
from malleable.site.config import ServiceConfig
from malleable.store import Store


def write_status(path: Path, status: dict[str, Any]) -> None:
    """Write the status file atomically (readers never see half of it)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps(status, indent=1) + "\n")
    os.chmod(tmp, 0o600 | (os.stat(path.parent).st_mode & 0o040))  # the directory's group
    os.replace(tmp, path)


def read_status(config: ServiceConfig) -> dict[str, Any]:
    """The last status the service wrote, with ``running`` (its pid alive and recent)
    and the journal's resizes in flight; InputError when it never ran."""
    path = config.status_path
    try:
        status: dict[str, Any] = json.loads(path.read_text())
    except FileNotFoundError:
        raise InputError(f"no status file {path}: the service has not run with this "
                         "config yet", source=config.source) from None
    except (OSError, json.JSONDecodeError) as exc:
        raise InputError(f"cannot read the status file {path}: {exc}",
                         source=config.source) from None
    status["running"] = _alive(int(status.get("pid", 0)))
    last = status.get("last_cycle") or 0.0
    status["stale"] = time.time() - float(last) > 3 * float(status.get("poll", 5.0)) + 10
    status["pending_resizes"] = _open_resizes(config.state)
    return status


def _alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _open_resizes(state: Path) -> list[dict[str, Any]]:
    if not state.exists():
        return []
    store = Store.open(state)
    try:
        return [{"site": site, "job": job, "slurm_id": slurm}
                for _token, site, job, slurm in store.open_resizes()]
    finally:
        store.close()
