"""The agent's and the lease client's TLS settings: checked when given (files that exist
and fit), so a wrong path is an error at start, not a reconnect loop."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.config import AgentConfig
from client.leases import LeaseClient
from coordinator.tls_files import make_ca, make_leaf, node_leaf
from shared.tls import TlsError


@pytest.fixture
def pki(tmp_path: Path) -> Path:
    make_ca(tmp_path)
    make_leaf(tmp_path, node_leaf("a"))
    make_leaf(tmp_path, node_leaf("b"))
    return tmp_path


def test_a_node_certificate_and_the_ca_make_the_agents_context(pki: Path) -> None:
    config = AgentConfig(
        server="https://coord.example:7600",
        tls_ca_file=str(pki / "ca.pem"),
        tls_cert_file=str(pki / "node-a.pem"),
        tls_key_file=str(pki / "node-a-key.pem"),
    )
    assert config.tls_context() is not None
    assert AgentConfig().tls_context() is None  # aiohttp's default: the system's CAs


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"tls_cert_file": "node-a.pem"}, "go together"),
        ({"tls_ca_file": "missing.pem"}, "missing.pem"),
        ({"tls_cert_file": "node-a.pem", "tls_key_file": "node-b-key.pem"}, "is the key"),
    ],
    ids=["cert-without-key", "missing-ca", "key-of-another"],
)
def test_unusable_agent_tls_files_are_refused(
    pki: Path, settings: dict[str, str], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        AgentConfig(
            tls_ca_file=str(pki / settings.get("tls_ca_file", "ca.pem")),
            tls_cert_file=str(pki / settings["tls_cert_file"])
            if "tls_cert_file" in settings
            else "",
            tls_key_file=str(pki / settings["tls_key_file"]) if "tls_key_file" in settings else "",
        )


def test_the_lease_client_refuses_a_ca_file_it_cannot_read(tmp_path: Path) -> None:
    with pytest.raises(TlsError, match="CA file"):
        LeaseClient("https://coord.example:7600", token="t", ca_file=str(tmp_path / "none.pem"))
