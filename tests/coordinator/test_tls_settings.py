"""The coordinator's TLS settings: checked when loaded (files that exist and fit), and
no plain HTTP beyond loopback unless the operator says ``allow_insecure_http``."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from coordinator.config import CoordinatorConfig, is_loopback
from coordinator.tls_files import make_ca, make_leaf, node_leaf, server_leaf
from tests.coordinator.conftest import API_TOKEN, JOIN_TOKEN

COORDINATOR = str(Path(sys.executable).parent / "allot-coordinator")
TOKENS: dict[str, Any] = {"join_token": JOIN_TOKEN, "api_tokens": [API_TOKEN]}


@pytest.fixture
def pki(tmp_path: Path) -> Path:
    make_ca(tmp_path)
    make_leaf(tmp_path, server_leaf(["coord.example"]))
    make_leaf(tmp_path, node_leaf("a"))
    return tmp_path


def served(pki: Path) -> dict[str, Any]:
    return {"tls_cert_file": str(pki / "server.pem"), "tls_key_file": str(pki / "server-key.pem")}


@pytest.mark.parametrize("host", ["127.0.0.1", "127.9.9.9", "::1", "localhost"])
def test_loopback_stays_plain_http(host: str) -> None:
    assert is_loopback(host)
    assert not CoordinatorConfig(**TOKENS, host=host).tls


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "10.1.2.3", "coord.example", ""])
def test_beyond_loopback_without_tls_is_refused_with_the_ways_out(host: str) -> None:
    with pytest.raises(ValueError, match="beyond loopback and TLS is off") as refused:
        CoordinatorConfig(**TOKENS, host=host)
    assert "tls_cert_file and tls_key_file" in str(refused.value)
    assert "allow_insecure_http = true" in str(refused.value)


def test_allow_insecure_http_or_tls_lets_it_listen_beyond_loopback(pki: Path) -> None:
    assert not CoordinatorConfig(**TOKENS, host="0.0.0.0", allow_insecure_http=True).tls
    assert CoordinatorConfig(**TOKENS, host="0.0.0.0", **served(pki)).tls


def test_with_a_client_ca_the_join_token_may_be_left_out(pki: Path) -> None:
    config = CoordinatorConfig(
        api_tokens=[API_TOKEN], **served(pki), tls_client_ca_file=str(pki / "ca.pem")
    )
    assert config.join_token == ""
    with pytest.raises(ValueError, match="join_token must be set"):
        CoordinatorConfig(api_tokens=[API_TOKEN], **served(pki))


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"tls_cert_file": "server.pem"}, "go together"),
        ({"tls_client_ca_file": "ca.pem"}, "tls_client_ca_file needs tls_cert_file"),
        ({"tls_cert_file": "server.pem", "tls_key_file": "node-a-key.pem"}, "is the key"),
        ({"tls_cert_file": "server.pem", "tls_key_file": "missing.pem"}, "missing.pem"),
        (
            {
                "tls_cert_file": "server.pem",
                "tls_key_file": "server-key.pem",
                "tls_client_ca_file": "server-key.pem",
            },
            "client CA file",
        ),
    ],
    ids=["cert-without-key", "client-ca-without-tls", "key-mismatch", "missing", "bad-ca"],
)
def test_unusable_tls_files_are_refused_at_load(
    pki: Path, settings: dict[str, str], message: str
) -> None:
    in_dir: dict[str, Any] = {name: str(pki / file) for name, file in settings.items()}
    with pytest.raises(ValueError, match=message):
        CoordinatorConfig(**TOKENS, **in_dir)


def test_the_coordinator_refuses_to_start_in_one_line(tmp_path: Path) -> None:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("ALLOT_")}
    environment["ALLOT_COORDINATOR_API_TOKENS"] = API_TOKEN
    environment["ALLOT_COORDINATOR_JOIN_TOKEN"] = JOIN_TOKEN
    result = subprocess.run(
        [COORDINATOR, f"--data-dir={tmp_path}", "--host=0.0.0.0", "--port=0"],
        env=environment,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, lines
    assert "beyond loopback and TLS is off" in lines[0]
    assert "allow_insecure_http" in lines[0]
    assert not (tmp_path / "allot.db").exists()
