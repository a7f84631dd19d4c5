"""TLS contexts for allot's links, built in one place for the coordinator, the agent and
the lease client.

    context = server_context(cert_file, key_file, client_ca_file)    # TlsError if unusable
    reload_server_context(context, cert_file, key_file, client_ca_file)  # on SIGHUP
    context = client_context(ca_file, cert_file, key_file)   # None: nothing to configure
    names = certified_names(peercert)     # the node names a client certificate allows

A server context asks for a client certificate only when a client CA is given, and then
optionally (``CERT_OPTIONAL``): API clients on the same port present none, while a
certificate that does not verify against that CA fails the handshake. Which requests
need one is the application's business (the agent socket does).
"""

from __future__ import annotations

import ssl
from typing import Any

MIN_VERSION = ssl.TLSVersion.TLSv1_2


class TlsError(Exception):
    """A certificate, key or CA file cannot be used; the message names the file."""


def server_context(cert_file: str, key_file: str, client_ca_file: str = "") -> ssl.SSLContext:
    """A context that serves ``cert_file`` (with ``key_file``) and, with ``client_ca_file``,
    verifies the client certificates offered against it. Raises ``TlsError``."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = MIN_VERSION
    _load(context, cert_file, key_file, client_ca_file)
    return context


def reload_server_context(
    context: ssl.SSLContext, cert_file: str, key_file: str, client_ca_file: str = ""
) -> None:
    """Read the files again into ``context``: handshakes from now on use them, connections
    already open keep what they agreed. Raises ``TlsError`` and leaves ``context`` as it
    was when a file is unusable.

    The files are first loaded into a context of their own: ``load_cert_chain`` on the
    live context with a key that does not match would leave it with no key at all. A CA
    once loaded cannot be taken out of a context: a client CA removed from the file stays
    trusted until the coordinator restarts."""
    server_context(cert_file, key_file, client_ca_file)
    _load(context, cert_file, key_file, client_ca_file)


def client_context(
    ca_file: str = "", cert_file: str = "", key_file: str = ""
) -> ssl.SSLContext | None:
    """A context that trusts ``ca_file`` (else the system's CAs) and presents ``cert_file``
    when given; None when nothing is given, so the HTTP client uses its default. Raises
    ``TlsError``."""
    if not (ca_file or cert_file):
        return None
    try:
        context = ssl.create_default_context(cafile=ca_file or None)
    except (OSError, ssl.SSLError) as error:
        raise TlsError(f"CA file {ca_file}: {_reason(error)}") from None
    context.minimum_version = MIN_VERSION
    if cert_file:
        _load_chain(context, cert_file, key_file)
    return context


def certified_names(peercert: dict[str, Any] | None) -> frozenset[str]:
    """The names a verified peer certificate (``SSLSocket.getpeercert()``) vouches for:
    its DNS subject alternative names, or its common name when it has none; empty
    without a certificate."""
    if not peercert:
        return frozenset()
    dns = frozenset(value for kind, value in peercert.get("subjectAltName", ()) if kind == "DNS")
    if dns:
        return dns
    return frozenset(
        value
        for relative_name in peercert.get("subject", ())
        for key, value in relative_name
        if key == "commonName"
    )


def _load(context: ssl.SSLContext, cert_file: str, key_file: str, client_ca_file: str) -> None:
    _load_chain(context, cert_file, key_file)
    if client_ca_file:
        try:
            context.load_verify_locations(cafile=client_ca_file)
        except (OSError, ssl.SSLError) as error:
            raise TlsError(f"client CA file {client_ca_file}: {_reason(error)}") from None
        context.verify_mode = ssl.CERT_OPTIONAL


def _load_chain(context: ssl.SSLContext, cert_file: str, key_file: str) -> None:
    _check_readable(cert_file, "certificate")
    if key_file:
        _check_readable(key_file, "key")
    try:
        context.load_cert_chain(cert_file, key_file or None)
    except ssl.SSLError as error:  # before OSError, its base class
        raise TlsError(
            f"certificate {cert_file} with key {key_file or cert_file}: {_reason(error)}"
            " (is the key the certificate's, and both PEM?)"
        ) from None
    except OSError as error:
        raise TlsError(_reason(error)) from None


def _check_readable(path: str, what: str) -> None:
    """Name the file that cannot be read: ``load_cert_chain`` says only "No such file"."""
    try:
        with open(path, "rb"):
            pass
    except OSError as error:
        raise TlsError(f"{what} file {path}: {error.strerror or error}") from None


def _reason(error: OSError) -> str:
    if isinstance(error, ssl.SSLError):
        return error.reason or str(error)
    where = f"{error.filename}: " if error.filename else ""
    return f"{where}{error.strerror or error}"
