"""``--ca-file``, ``ALLOT_CA_FILE`` and a context's ``ca_file`` against the real
coordinator served over HTTPS with a certificate from a CA made here (``cryptography``):
the right CA lets allotctl in, another CA is refused with a message that says
"certificate", a CA file that cannot be read is a usage error."""

from __future__ import annotations

import asyncio
import datetime
import ipaddress
import ssl
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from aiohttp import web
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from allotctl.main import main
from coordinator.app import make_app
from tests.coordinator.conftest import API_TOKEN, config_for

LOOPBACK = "127.0.0.1"


@dataclass(frozen=True)
class Issuer:
    key: ec.EllipticCurvePrivateKey
    certificate: x509.Certificate


def _name(common_name: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])


def _signed(builder: x509.CertificateBuilder, key: ec.EllipticCurvePrivateKey) -> x509.Certificate:
    now = datetime.datetime.now(datetime.UTC)
    return (
        builder.serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .sign(key, hashes.SHA256())
    )


def make_ca(common_name: str) -> Issuer:
    key = ec.generate_private_key(ec.SECP256R1())
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name(common_name))
        .issuer_name(_name(common_name))
        .public_key(key.public_key())
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True, content_commitment=False, key_encipherment=False,
                data_encipherment=False, key_agreement=False, key_cert_sign=True,
                crl_sign=True, encipher_only=False, decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), False)
    )  # fmt: skip
    return Issuer(key, _signed(builder, key))


def write_pem(path: Path, certificate: x509.Certificate) -> Path:
    path.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
    return path


def server_context(ca: Issuer, directory: Path) -> ssl.SSLContext:
    """A TLS context serving a certificate for 127.0.0.1 signed by ``ca``."""
    key = ec.generate_private_key(ec.SECP256R1())
    builder = (
        x509.CertificateBuilder()
        .subject_name(_name("allot coordinator"))
        .issuer_name(ca.certificate.subject)
        .public_key(key.public_key())
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address(LOOPBACK))]), False
        )
        .add_extension(x509.ExtendedKeyUsage([x509.OID_SERVER_AUTH]), False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca.key.public_key()), False
        )
    )
    certificate = write_pem(directory / "server.pem", _signed(builder, ca.key))
    private = directory / "server-key.pem"
    private.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(certificate, private)
    return context


@dataclass(frozen=True)
class HttpsCoordinator:
    url: str
    ca_file: Path  # the CA that signed its certificate
    other_ca_file: Path  # a CA that did not


@pytest.fixture
async def https_coordinator(tmp_path: Path) -> AsyncIterator[HttpsCoordinator]:
    ca = make_ca("allot test CA")
    ca_file = write_pem(tmp_path / "ca.pem", ca.certificate)
    other_ca_file = write_pem(tmp_path / "other-ca.pem", make_ca("another CA").certificate)
    runner = web.AppRunner(make_app(config_for(tmp_path)), access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, LOOPBACK, 0, ssl_context=server_context(ca, tmp_path))
    await site.start()
    port = runner.addresses[0][1]
    yield HttpsCoordinator(f"https://{LOOPBACK}:{port}", ca_file, other_ca_file)
    await runner.cleanup()


async def allotctl(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = await asyncio.to_thread(main, ["--token", API_TOKEN, *argv])
    out, err = capsys.readouterr()
    return code, out, err


async def test_the_flag_the_environment_and_a_context_give_the_ca(
    https_coordinator: HttpsCoordinator,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    server = https_coordinator.url
    ca = str(https_coordinator.ca_file)
    expected = (0, "no nodes have registered yet\n", "")
    assert await allotctl(capsys, "--server", server, "--ca-file", ca, "nodes") == expected
    monkeypatch.setenv("ALLOT_CA_FILE", ca)
    assert await allotctl(capsys, "--server", server, "nodes") == expected
    monkeypatch.delenv("ALLOT_CA_FILE")
    await asyncio.to_thread(
        main, ["config", "set-context", "tls", "--server", server, "--ca-file", ca]
    )
    capsys.readouterr()
    assert await allotctl(capsys, "nodes") == expected


async def test_another_ca_is_refused_saying_certificate(
    https_coordinator: HttpsCoordinator, capsys: pytest.CaptureFixture[str]
) -> None:
    server = https_coordinator.url
    for ca in ([], ["--ca-file", str(https_coordinator.other_ca_file)]):  # the system's, another
        code, out, err = await allotctl(capsys, "--server", server, *ca, "nodes")
        assert (code, out) == (1, "")
        assert err.startswith(f"allotctl: cannot reach the coordinator at {server}:")
        assert "certificate" in err
        assert "--ca-file" in err


async def test_a_ca_file_that_cannot_be_read_is_a_usage_error(
    https_coordinator: HttpsCoordinator, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    server = https_coordinator.url
    missing = tmp_path / "missing.pem"
    code, out, err = await allotctl(capsys, "--server", server, "--ca-file", str(missing), "nodes")
    assert (code, out) == (2, "")
    assert err == f"allotctl: cannot use the CA file {missing}: No such file or directory\n"
    garbage = tmp_path / "garbage.pem"
    await asyncio.to_thread(garbage.write_text, "not a certificate\n")
    code, _, err = await allotctl(capsys, "--server", server, "--ca-file", str(garbage), "nodes")
    assert code == 2
    assert err.startswith(f"allotctl: cannot use the CA file {garbage}: ")
