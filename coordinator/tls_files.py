"""Certificates for clusters without a PKI: a CA, and the leaves it signs, as PEM files.

    written = make_ca(Path("tls"))                        # tls/ca.pem, tls/ca-key.pem
    written = make_leaf(Path("tls"), server_leaf(["coord.example", "10.0.0.5"]))
    written = make_leaf(Path("tls"), node_leaf("gpu-7"))  # tls/node-gpu-7.pem, ...-key.pem
    written = make_leaf(Path("tls"), client_leaf())       # tls/client.pem, client-key.pem

Keys are EC P-256, written with mode 0600; certificates are 0644. Nothing is written
when any file to write exists already, unless ``force``; ``TlsFileError`` says why. A
leaf is signed by the CA read from the same directory.

What each leaf may do is in its extended key usage: a server certificate serves
(serverAuth), a node or client certificate only identifies its holder to the coordinator
(clientAuth). A node certificate names the node as its common name and only DNS subject
alternative name, which is what the coordinator lets that agent register as. A client
certificate's common name, ``allot client``, has a space, so it is no node's name.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import re
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from coordinator.services.nodes import node_name_problem

CA_DAYS = 3650
LEAF_DAYS = 365
CLIENT_COMMON_NAME = "allot client"
# Leaves are valid from a little before now: a host whose clock is a few minutes behind
# the one that made them must not refuse them as not yet valid.
BACKDATE = datetime.timedelta(minutes=5)
_LABEL = r"[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
_DNS_NAME = re.compile(rf"(\*\.)?{_LABEL}(\.{_LABEL})*")  # a leading "*." is a wildcard


class TlsFileError(Exception):
    """The files cannot be written as asked; nothing was written."""


@dataclass(frozen=True, kw_only=True)
class Leaf:
    """What one leaf certificate says and where it goes: ``<stem>.pem``, ``<stem>-key.pem``."""

    stem: str
    common_name: str
    names: tuple[x509.GeneralName, ...]
    usage: x509.ObjectIdentifier


def server_leaf(hosts: list[str]) -> Leaf:
    """The coordinator's certificate, valid for each of ``hosts``: an IP address when it
    parses as one, else a DNS name."""
    if not hosts:
        raise TlsFileError("--server needs at least one host name or address")
    names: list[x509.GeneralName] = []
    for host in hosts:
        try:
            names.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            if len(host) > 253 or not _DNS_NAME.fullmatch(host):
                raise TlsFileError(
                    f"--server {host!r} is neither an IP address nor a DNS name"
                ) from None
            names.append(x509.DNSName(host))
    return Leaf(
        stem="server",
        common_name=hosts[0],
        names=tuple(names),
        usage=ExtendedKeyUsageOID.SERVER_AUTH,
    )


def node_leaf(node: str) -> Leaf:
    """An agent's certificate: it may register as ``node`` and no other node."""
    problem = node_name_problem(node)
    if problem is not None:
        raise TlsFileError(f"--node: {problem}")
    return Leaf(
        stem=f"node-{node}",
        common_name=node,
        names=(x509.DNSName(node),),
        usage=ExtendedKeyUsageOID.CLIENT_AUTH,
    )


def client_leaf() -> Leaf:
    """A certificate for an API client (allotctl, a lease client) of a coordinator that
    asks for client certificates; it names no node."""
    return Leaf(
        stem="client",
        common_name=CLIENT_COMMON_NAME,
        names=(),
        usage=ExtendedKeyUsageOID.CLIENT_AUTH,
    )


def make_ca(directory: Path, *, days: int = CA_DAYS, force: bool = False) -> list[Path]:
    """Write a new CA's certificate and key into ``directory``; the paths written."""
    cert_path, key_path = directory / "ca.pem", directory / "ca-key.pem"
    _check_writable([cert_path, key_path], days, force)
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "allot CA")])
    start = _now() - BACKDATE
    certificate = (
        _builder(name, name, key.public_key(), start, days)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(_key_usage(cert_sign=True), critical=True)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(key.public_key()), critical=False
        )
        .sign(key, hashes.SHA256())
    )
    directory.mkdir(parents=True, exist_ok=True)
    return _write(cert_path, certificate, key_path, key)


def make_leaf(
    directory: Path, leaf: Leaf, *, days: int = LEAF_DAYS, force: bool = False
) -> list[Path]:
    """Write ``leaf``'s certificate, signed by the CA in ``directory``, and its key."""
    cert_path, key_path = directory / f"{leaf.stem}.pem", directory / f"{leaf.stem}-key.pem"
    _check_writable([cert_path, key_path], days, force)
    ca_certificate, ca_key = _read_ca(directory)
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, leaf.common_name)])
    builder = (
        _builder(subject, ca_certificate.subject, key.public_key(), _now() - BACKDATE, days)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_key_usage(cert_sign=False), critical=True)
        .add_extension(x509.ExtendedKeyUsage([leaf.usage]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
            critical=False,
        )
    )
    if leaf.names:
        builder = builder.add_extension(
            x509.SubjectAlternativeName(list(leaf.names)), critical=False
        )
    return _write(cert_path, builder.sign(ca_key, hashes.SHA256()), key_path, key)


def _check_writable(paths: list[Path], days: int, force: bool) -> None:
    if days < 1:
        raise TlsFileError(f"--days must be at least 1, got {days}")
    existing = [str(path) for path in paths if path.exists()]
    if existing and not force:
        raise TlsFileError(
            f"{', '.join(existing)} already exist{'s' if len(existing) == 1 else ''};"
            " give --force to replace"
        )


def _read_ca(directory: Path) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    cert_path, key_path = directory / "ca.pem", directory / "ca-key.pem"
    try:
        certificate = x509.load_pem_x509_certificate(cert_path.read_bytes())
        key = serialization.load_pem_private_key(key_path.read_bytes(), password=None)
    except FileNotFoundError as error:
        raise TlsFileError(
            f"no CA in {directory}: {error.filename} is missing"
            f" (make one with: allot-coordinator tls ca --dir {directory})"
        ) from None
    except (OSError, ValueError, TypeError) as error:
        raise TlsFileError(f"the CA in {directory} cannot be read: {error}") from None
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        raise TlsFileError(f"{key_path} is not an EC key made by allot-coordinator tls ca")
    return certificate, key


def _builder(
    subject: x509.Name,
    issuer: x509.Name,
    public_key: ec.EllipticCurvePublicKey,
    start: datetime.datetime,
    days: int,
) -> x509.CertificateBuilder:
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(public_key)
        .serial_number(x509.random_serial_number())
        .not_valid_before(start)
        .not_valid_after(start + BACKDATE + datetime.timedelta(days=days))
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(public_key), critical=False)
    )


def _key_usage(*, cert_sign: bool) -> x509.KeyUsage:
    return x509.KeyUsage(
        digital_signature=not cert_sign,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=cert_sign,
        crl_sign=cert_sign,
        encipher_only=False,
        decipher_only=False,
    )


def _write(
    cert_path: Path,
    certificate: x509.Certificate,
    key_path: Path,
    key: ec.EllipticCurvePrivateKey,
) -> list[Path]:
    key_pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    _write_file(key_path, key_pem, mode=0o600)
    _write_file(cert_path, certificate.public_bytes(serialization.Encoding.PEM), mode=0o644)
    return [cert_path, key_path]


def _write_file(path: Path, data: bytes, *, mode: int) -> None:
    """Write ``path`` with ``mode`` from its first byte (a key is never readable by
    others, not even for a moment), replacing a file there."""
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(descriptor, "wb") as file:
        os.fchmod(file.fileno(), mode)  # an existing file keeps its mode through O_CREAT
        file.write(data)


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC)
