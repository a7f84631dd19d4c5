"""``allot-coordinator tls ca|cert``: what the certificates say (SANs, key usage,
validity), the files' modes, and that nothing is replaced or half-written when asked
wrongly. The command itself runs as a real process; the rest reads the files it wrote."""

from __future__ import annotations

import datetime
import ipaddress
import os
import subprocess
import sys
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID

from coordinator.tls_files import (
    TlsFileError,
    client_leaf,
    make_ca,
    make_leaf,
    node_leaf,
    server_leaf,
)
from shared.tls import certified_names, client_context, server_context

COORDINATOR = str(Path(sys.executable).parent / "allot-coordinator")


def tls(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [COORDINATOR, "tls", *args], capture_output=True, text=True, timeout=60, check=False
    )


def load(path: Path) -> x509.Certificate:
    return x509.load_pem_x509_certificate(path.read_bytes())


def mode(path: Path) -> int:
    return path.stat().st_mode & 0o777


def extended_usage(certificate: x509.Certificate) -> list[x509.ObjectIdentifier]:
    return list(certificate.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value)


def test_the_command_writes_a_ca_and_each_kind_of_leaf(tmp_path: Path) -> None:
    made = tls("ca", "--dir", str(tmp_path))
    assert made.returncode == 0, made.stderr
    assert made.stdout.split() == ["wrote", f"{tmp_path}/ca.pem", "wrote", f"{tmp_path}/ca-key.pem"]
    for kind in (
        ["--server", "coord.example", "10.0.0.5", "::1"],
        ["--node", "gpu-7"],
        ["--client"],
    ):
        result = tls("cert", "--dir", str(tmp_path), *kind)
        assert result.returncode == 0, result.stderr
    written = sorted(path.name for path in tmp_path.iterdir())
    assert written == sorted(
        f"{stem}{end}"
        for stem in ("ca", "server", "node-gpu-7", "client")
        for end in (".pem", "-key.pem")
    )
    for path in tmp_path.iterdir():
        assert mode(path) == (0o600 if path.name.endswith("-key.pem") else 0o644), path

    ca = load(tmp_path / "ca.pem")
    constraints = ca.extensions.get_extension_for_class(x509.BasicConstraints).value
    assert constraints.ca
    assert ca.extensions.get_extension_for_class(x509.KeyUsage).value.key_cert_sign
    assert ca.not_valid_after_utc - ca.not_valid_before_utc >= datetime.timedelta(days=3650)

    server = load(tmp_path / "server.pem")
    names = server.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert names.get_values_for_type(x509.DNSName) == ["coord.example"]
    assert names.get_values_for_type(x509.IPAddress) == [
        ipaddress.ip_address("10.0.0.5"),
        ipaddress.ip_address("::1"),
    ]
    assert extended_usage(server) == [ExtendedKeyUsageOID.SERVER_AUTH]
    assert not server.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    assert server.not_valid_after_utc - server.not_valid_before_utc < datetime.timedelta(days=367)
    assert isinstance(server.public_key(), ec.EllipticCurvePublicKey)
    server.verify_directly_issued_by(ca)

    node = load(tmp_path / "node-gpu-7.pem")
    names = node.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert names.get_values_for_type(x509.DNSName) == ["gpu-7"]
    assert node.subject.rfc4514_string() == "CN=gpu-7"
    assert extended_usage(node) == [ExtendedKeyUsageOID.CLIENT_AUTH]
    node.verify_directly_issued_by(ca)

    client = load(tmp_path / "client.pem")
    assert extended_usage(client) == [ExtendedKeyUsageOID.CLIENT_AUTH]
    with pytest.raises(x509.ExtensionNotFound):
        client.extensions.get_extension_for_class(x509.SubjectAlternativeName)


def test_the_files_make_working_tls_contexts(tmp_path: Path) -> None:
    make_ca(tmp_path)
    make_leaf(tmp_path, server_leaf(["localhost"]))
    make_leaf(tmp_path, node_leaf("a"))
    server_context(str(tmp_path / "server.pem"), str(tmp_path / "server-key.pem"))
    client_context(
        str(tmp_path / "ca.pem"), str(tmp_path / "node-a.pem"), str(tmp_path / "node-a-key.pem")
    )


def test_days_sets_the_validity(tmp_path: Path) -> None:
    assert tls("ca", "--dir", str(tmp_path), "--days", "30").returncode == 0
    assert tls("cert", "--dir", str(tmp_path), "--node", "a", "--days", "7").returncode == 0
    for name, days in (("ca.pem", 30), ("node-a.pem", 7)):
        certificate = load(tmp_path / name)
        lasts = certificate.not_valid_after_utc - certificate.not_valid_before_utc
        assert datetime.timedelta(days=days) <= lasts < datetime.timedelta(days=days, hours=1)


def test_an_existing_file_is_replaced_only_with_force(tmp_path: Path) -> None:
    make_ca(tmp_path)
    make_leaf(tmp_path, node_leaf("a"))
    before = {path.name: path.read_bytes() for path in tmp_path.iterdir()}

    again = tls("cert", "--dir", str(tmp_path), "--node", "a")
    assert again.returncode == 1
    assert "already exist" in again.stderr
    assert "--force" in again.stderr
    assert tls("ca", "--dir", str(tmp_path)).returncode == 1
    assert {path.name: path.read_bytes() for path in tmp_path.iterdir()} == before

    (tmp_path / "node-a-key.pem").chmod(0o644)
    forced = tls("cert", "--dir", str(tmp_path), "--node", "a", "--force")
    assert forced.returncode == 0, forced.stderr
    assert (tmp_path / "node-a.pem").read_bytes() != before["node-a.pem"]
    assert mode(tmp_path / "node-a-key.pem") == 0o600  # a replaced key is private again


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--node", "Not_A_Node"], "lower-case DNS name"),
        (["--server", "bad host"], "neither an IP address nor a DNS name"),
        (["--node", "a", "--days", "0"], "--days must be at least 1"),
    ],
    ids=["node-name", "server-host", "days"],
)
def test_bad_input_is_refused_and_writes_nothing(
    tmp_path: Path, args: list[str], message: str
) -> None:
    make_ca(tmp_path)
    before = sorted(os.listdir(tmp_path))
    result = tls("cert", "--dir", str(tmp_path), *args)
    assert result.returncode == 1
    assert message in result.stderr
    assert sorted(os.listdir(tmp_path)) == before


def test_a_leaf_without_a_ca_says_how_to_make_one(tmp_path: Path) -> None:
    with pytest.raises(TlsFileError, match="allot-coordinator tls ca --dir"):
        make_leaf(tmp_path, client_leaf())
    assert list(tmp_path.iterdir()) == []


def test_a_client_certificate_names_no_node(tmp_path: Path) -> None:
    """Its common name has a space: no hello can name it."""
    make_ca(tmp_path)
    make_leaf(tmp_path, client_leaf())
    subject = load(tmp_path / "client.pem").subject.rfc4514_string()
    assert subject == "CN=allot client"
    peercert = {"subject": ((("commonName", "allot client"),),)}
    assert certified_names(peercert) == {"allot client"}
