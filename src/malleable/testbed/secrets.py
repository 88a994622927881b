"""Secrets generated at bring-up, into the testbed's state directory (never committed).

``secrets/`` holds the munge key shared by every daemon, one SSH host key shared by the
testbed's containers, the user key of the ``malleable`` login, the key of OAR's ``oar``
user, the accounting database password, the JWT key of slurmctld and slurmdbd (slurmrestd's
tokens), and the ``known_hosts`` file that pins the host
key to every name and address a client may use (OAR's nodes also as ``[NODE]:6667``).
"""

from __future__ import annotations

import os
import secrets as _random
from collections.abc import Iterable
from pathlib import Path

from malleable.errors import require_extra

require_extra("cryptography", "testbed", "the testbed")  # one line, not a traceback
from cryptography.hazmat.primitives import serialization  # noqa: E402
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey  # noqa: E402

MUNGE_KEY = "munge.key"
HOST_KEY = "ssh_host_ed25519_key"
USER_KEY = "id_ed25519"
#: The key of OAR's ``oar`` user (server to nodes), generated per testbed.
OAR_KEY = "oar_id_ed25519"
DB_PASS = "dbpass"
#: The HS256 key slurmctld and slurmdbd check slurmrestd's JWTs with (``scontrol token``).
JWT_KEY = "jwt_hs256.key"
#: Bytes of the JWT key (Slurm's documentation makes one of 32 random bytes).
JWT_KEY_BYTES = 32
KNOWN_HOSTS = "known_hosts"
#: Bytes of a munge key (munge's own default).
MUNGE_KEY_BYTES = 1024


def _write(path: Path, data: bytes, mode: int) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)
    os.chmod(path, mode)


def _ssh_keypair(comment: str) -> tuple[bytes, bytes]:
    key = Ed25519PrivateKey.generate()
    private = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.OpenSSH,
                                serialization.NoEncryption())
    public = key.public_key().public_bytes(serialization.Encoding.OpenSSH,
                                           serialization.PublicFormat.OpenSSH)
    return private, public + b" " + comment.encode() + b"\n"


def generate(directory: Path, testbed: str) -> None:
    """Create every secret of a testbed in ``directory`` (existing ones are replaced).

    Private files are 0600; the directory is 0711 so that the containers' unprivileged
    user can read the public ``known_hosts`` in it (the state directory above is 0700).
    """
    directory.mkdir(parents=True, exist_ok=True, mode=0o711)
    os.chmod(directory, 0o711)
    _write(directory / MUNGE_KEY, _random.token_bytes(MUNGE_KEY_BYTES), 0o600)
    _write(directory / DB_PASS, _random.token_urlsafe(24).encode(), 0o600)
    _write(directory / JWT_KEY, _random.token_bytes(JWT_KEY_BYTES), 0o600)
    for name, comment in ((HOST_KEY, f"testbed-{testbed}-host"),
                          (USER_KEY, f"malleable@testbed-{testbed}"),
                          (OAR_KEY, f"oar@testbed-{testbed}")):
        private, public = _ssh_keypair(comment)
        _write(directory / name, private, 0o600)
        _write(directory / f"{name}.pub", public, 0o644)


def password() -> str:
    """A fresh database password (URL-safe: it goes into configuration files as is)."""
    return _random.token_urlsafe(24)


def host_public_key(directory: Path) -> str:
    """``TYPE BASE64`` of the testbed's host key (without its comment)."""
    fields = (directory / f"{HOST_KEY}.pub").read_text(encoding="ascii").split()
    return f"{fields[0]} {fields[1]}"


def known_hosts_line(names: Iterable[str], host_key: str) -> str:
    """One known_hosts line pinning ``host_key`` to every name (``[host]:port`` for ports)."""
    unique = list(dict.fromkeys(n for n in names if n))
    if not unique:
        raise ValueError("known_hosts_line needs at least one host name")
    return f"{','.join(unique)} {host_key}\n"


def write_known_hosts(directory: Path, names: Iterable[str]) -> Path:
    """(Re)write ``known_hosts`` atomically (the containers see it through a bind mount)."""
    path = directory / KNOWN_HOSTS
    tmp = directory / f".{KNOWN_HOSTS}.tmp"
    tmp.write_text(known_hosts_line(names, host_public_key(directory)), encoding="ascii")
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)
    return path
