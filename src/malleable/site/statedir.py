"""The service's state directory and files: explicit modes whatever the umask.

The journal (SQLite) and the status file say which users run which jobs where; only the
service account may write them, and by default only it may read them:

* the state directory (``service.state``'s directory) is made ``0700`` (``0750`` with
  ``service.group_readable = true``); one that exists is narrowed to that mode when the
  service owns it, and **refused** when another user or group may write it, or another
  user (not root) owns it;
* the journal and the status file are ``0600`` (``0640``): ``serve`` sets the process's
  umask to ``077`` (``027``) before anything is created (:func:`umask`), the status file
  is written with its mode, and existing files are narrowed.

A state directory that cannot be made is an :class:`~malleable.errors.InputError` (one
line: the path, the reason and how to fix it).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

from malleable.errors import InputError
from malleable.site.config import ServiceConfig


def modes(config: ServiceConfig) -> tuple[int, int]:
    """The state directory's and the files' modes."""
    return (0o750, 0o640) if config.group_readable else (0o700, 0o600)


def umask(config: ServiceConfig) -> int:
    """The service process's umask (``serve`` sets it before it opens anything)."""
    return 0o027 if config.group_readable else 0o077


def prepare(config: ServiceConfig) -> None:
    """Make or check the state directory, narrow the files there."""
    folder_mode, file_mode = modes(config)
    folder = config.state.parent
    _make(folder, folder_mode, config)
    _check(folder, folder_mode, config)
    for path in (config.state, config.status_path,
                 *(config.state.with_name(config.state.name + s) for s in ("-wal", "-shm",
                                                                           "-journal"))):
        narrow(path, file_mode)


def narrow(path: Path, mode: int) -> None:
    """Set ``path``'s mode to ``mode`` if it is a file of ours wider than that."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return
    if stat.S_ISREG(info.st_mode) and info.st_uid == os.getuid() \
            and stat.S_IMODE(info.st_mode) & ~mode:
        os.chmod(path, mode)


def _make(folder: Path, mode: int, config: ServiceConfig) -> None:
    try:
        folder.mkdir(mode=mode, parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"service.state: cannot create the state directory {folder}: "
                         f"{exc.strerror}; create it for the service account (e.g. "
                         f"`install -d -o malleable -m 0700 {folder}`) or choose another "
                         "service.state", source=config.source) from None


def _check(folder: Path, mode: int, config: ServiceConfig) -> None:
    info = os.stat(folder)
    me = os.getuid()
    if info.st_uid not in (me, 0):
        raise InputError(f"service.state: the state directory {folder} belongs to uid "
                         f"{info.st_uid}, not to the service account (uid {me}): give it "
                         "to the service account", source=config.source)
    if info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        raise InputError(f"service.state: the state directory {folder} is writable by others "
                         f"(mode {stat.S_IMODE(info.st_mode):04o}): `chmod {mode:04o} "
                         f"{folder}`", source=config.source)
    if info.st_uid == me and stat.S_IMODE(info.st_mode) & ~mode:
        os.chmod(folder, mode)
