"""The REST transport over TLS (``url = "https://..."`` and ``tls_ca``): a real TLS
listener on loopback in front of the stand-in slurmrestd, with a CA and a server key made
at run time (never stored). slurmrestd itself has no TLS as Debian packages it (docs/site.md
section 10: a TLS terminator in front of it)."""

from __future__ import annotations

import datetime
import ipaddress
import ssl
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from malleable.adapters.slurm.rest import RestCtl
from malleable.adapters.slurm.sites import rest_ctl
from malleable.config import load_config
from malleable.errors import ExternalError
from tests.unit.test_submit_rest import VERSION, FakeRest, _jwt


def _pki(tmp_path: Path) -> tuple[Path, Path, Path]:
    """A CA and a certificate for 127.0.0.1 signed by it: (ca.pem, cert.pem, key.pem)."""
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "test CA")])
    ca = (x509.CertificateBuilder().subject_name(ca_name).issuer_name(ca_name)
          .public_key(ca_key.public_key()).serial_number(x509.random_serial_number())
          .not_valid_before(now - datetime.timedelta(minutes=1))
          .not_valid_after(now + datetime.timedelta(hours=1))
          .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
          .sign(ca_key, hashes.SHA256()))
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (x509.CertificateBuilder()
            .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "127.0.0.1")]))
            .issuer_name(ca_name).public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=1))
            .not_valid_after(now + datetime.timedelta(hours=1))
            .add_extension(x509.SubjectAlternativeName(
                [x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), critical=False)
            .sign(ca_key, hashes.SHA256()))
    paths = tmp_path / "ca.pem", tmp_path / "cert.pem", tmp_path / "key.pem"
    paths[0].write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    paths[1].write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    paths[2].write_bytes(key.private_bytes(serialization.Encoding.PEM,
                                           serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    paths[2].chmod(0o600)
    return paths


@pytest.fixture
def tls_rest(tmp_path: Path) -> Iterator[tuple[FakeRest, Path]]:
    ca, cert, key = _pki(tmp_path)
    fake = FakeRest()
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    fake.server.socket = context.wrap_socket(fake.server.socket, server_side=True)
    fake.url = fake.url.replace("http://", "https://")
    thread = threading.Thread(target=fake.server.serve_forever, daemon=True)
    thread.start()
    yield fake, ca
    fake.server.shutdown()
    fake.server.server_close()


def _ctl(tmp_path: Path, url: str, ca: Path | None) -> RestCtl:
    token = tmp_path / "t.jwt"
    token.write_text(_jwt("malleable", time.time() + 600))
    path = tmp_path / "c.toml"
    path.write_text(f'[clusters.vu]\ntransport = "rest"\nurl = "{url}"\n'
                    f'token_file = "{token}"\n' + (f'tls_ca = "{ca}"\n' if ca else ""))
    ctl = rest_ctl(load_config(path).site("vu"))
    assert isinstance(ctl, RestCtl)
    ctl.client.retries = 0
    return ctl


def test_https_with_the_sites_ca_is_verified_and_used(
        tls_rest: tuple[FakeRest, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
        ) -> None:
    """``tls_ca`` wins over a CA bundle in the environment (requests lets
    ``REQUESTS_CA_BUNDLE`` override a session's own ``verify``)."""
    fake, ca = tls_rest
    (tmp_path / "other").mkdir()
    monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(_pki(tmp_path / "other")[0]))
    ctl = _ctl(tmp_path, fake.url, ca)
    try:
        assert ctl.client.slurm() == f"/slurm/{VERSION}"  # GET /openapi/v3 over TLS
        assert ctl.submit(["--nodes=1", "--hold"], "#!/bin/sh\ntrue\n") == 77
    finally:
        ctl.runner.close()
    assert [method for method, *_ in fake.sent] == ["GET", "POST"]


def test_an_unknown_certificate_is_refused_in_one_line(
        tls_rest: tuple[FakeRest, Path], tmp_path: Path) -> None:
    fake, _ = tls_rest
    ctl = _ctl(tmp_path, fake.url, None)  # the system's CAs do not know the test CA
    try:
        with pytest.raises(ExternalError, match=r"slurmrestd https://127\.0\.0\.1:\d+: "
                                                r"SSLError") as caught:
            ctl.client.version()
    finally:
        ctl.runner.close()
    assert "\n" not in str(caught.value)
    assert fake.sent == []  # no token ever went out
