"""The TLS contexts: which names a peer certificate allows, clear errors for unusable
files, and a reload that changes what new handshakes see (or, with a bad file, nothing)."""

from __future__ import annotations

import asyncio
import ssl
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from coordinator.tls_files import make_ca, make_leaf, node_leaf, server_leaf
from shared.tls import (
    TlsError,
    certified_names,
    client_context,
    reload_server_context,
    server_context,
)

NAMES = st.text("abc-1", min_size=1, max_size=8)


@given(dns=st.lists(NAMES, min_size=1, max_size=3), common=NAMES)
def test_dns_names_win_over_the_common_name(dns: list[str], common: str) -> None:
    peercert: dict[str, Any] = {
        "subject": ((("commonName", common),),),
        "subjectAltName": (("IP Address", "10.0.0.1"), *(("DNS", name) for name in dns)),
    }
    assert certified_names(peercert) == frozenset(dns)


@given(common=NAMES)
def test_the_common_name_counts_without_dns_names(common: str) -> None:
    peercert = {"subject": ((("countryName", "DE"),), (("commonName", common),))}
    assert certified_names(peercert) == {common}


@pytest.mark.parametrize("peercert", [None, {}], ids=["none", "empty"])
def test_no_certificate_allows_no_name(peercert: dict[str, Any] | None) -> None:
    assert certified_names(peercert) == frozenset()


@pytest.fixture
def pki(tmp_path: Path) -> Path:
    make_ca(tmp_path)
    make_leaf(tmp_path, server_leaf(["localhost", "127.0.0.1"]))
    make_leaf(tmp_path, node_leaf("a"))
    return tmp_path


def test_a_key_that_is_not_the_certificates_is_a_clear_error(pki: Path) -> None:
    with pytest.raises(TlsError, match="is the key the certificate's"):
        server_context(str(pki / "server.pem"), str(pki / "node-a-key.pem"))


def test_a_missing_file_is_named(pki: Path) -> None:
    with pytest.raises(TlsError, match=f"{pki}/nope.pem"):
        server_context(str(pki / "server.pem"), str(pki / "server-key.pem"), str(pki / "nope.pem"))
    with pytest.raises(TlsError, match="CA file"):
        client_context(str(pki / "nope.pem"))


def test_nothing_given_is_the_default_context() -> None:
    assert client_context() is None


async def served_certificate(port: int, ca: Path) -> bytes:
    """The DER certificate a new, verified handshake with 127.0.0.1:port gets."""
    context = ssl.create_default_context(cafile=str(ca))
    reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=context)
    ssl_object = writer.get_extra_info("ssl_object")
    certificate = ssl_object.getpeercert(binary_form=True)
    writer.close()
    await writer.wait_closed()
    del reader
    assert certificate is not None
    return bytes(certificate)


def der(path: Path) -> bytes:
    return ssl.PEM_cert_to_DER_cert(path.read_text())


async def test_a_reload_changes_new_handshakes_and_a_bad_file_changes_nothing(pki: Path) -> None:
    cert, key = pki / "server.pem", pki / "server-key.pem"
    context = server_context(str(cert), str(key))

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0, ssl=context)
    port = server.sockets[0].getsockname()[1]
    async with server:
        first = await served_certificate(port, pki / "ca.pem")
        assert first == der(cert)

        make_leaf(pki, server_leaf(["127.0.0.1"]), force=True)
        reload_server_context(context, str(cert), str(key))
        second = await served_certificate(port, pki / "ca.pem")
        assert second == der(cert) != first

        key.write_text("not a key")
        with pytest.raises(TlsError):
            reload_server_context(context, str(cert), str(key))
        assert await served_certificate(port, pki / "ca.pem") == second
