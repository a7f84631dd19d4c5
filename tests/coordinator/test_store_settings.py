"""The store settings of the coordinator: etcd's are checked before anything starts, and
a coordinator whose etcd does not answer says so and exits."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from coordinator.config import CoordinatorConfig

COORDINATOR = str(Path(sys.executable).parent / "allot-coordinator")
TOKENS: dict[str, Any] = {
    "join_token": "join-token-for-tests-0123456789",
    "api_tokens": ["api-token-for-tests-0123456789"],
}


def test_sqlite_stays_the_default() -> None:
    config = CoordinatorConfig(**TOKENS)

    assert config.store == "sqlite"
    assert config.store_location == "/var/lib/allot/allot.db"


def test_etcd_settings_pass_through(tmp_path: Path) -> None:
    ca = tmp_path / "ca.pem"
    ca.write_text("not checked here: grpc reads it")
    config = CoordinatorConfig(
        **TOKENS,
        store="etcd",
        etcd_endpoints=["10.0.0.1:2379", "https://etcd-2.example:2379"],
        etcd_prefix="/prod",
        etcd_ca_file=str(ca),
        etcd_user="allot",
        etcd_password="secret",
    )

    settings = config.etcd
    assert settings.endpoints == ("10.0.0.1:2379", "https://etcd-2.example:2379")
    assert (settings.prefix, settings.ca_file, settings.user) == ("/prod", str(ca), "allot")
    assert config.store_location == "etcd 10.0.0.1:2379,https://etcd-2.example:2379 prefix /prod"


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        pytest.param({"store": "etcd"}, "needs etcd_endpoints", id="no-endpoints"),
        pytest.param({"etcd_endpoints": ["etcd:port"]}, "is not host:port", id="bad-port"),
        pytest.param({"etcd_endpoints": ["http://"]}, "is not host:port", id="no-host"),
        pytest.param({"etcd_prefix": "allot"}, "etcd_prefix must start", id="prefix"),
        pytest.param({"etcd_prefix": "/allot/"}, "etcd_prefix must start", id="slash"),
        pytest.param({"etcd_user": "u"}, "give both or neither", id="user-only"),
        pytest.param({"etcd_cert_file": "/c"}, "give both or neither", id="cert-only"),
        pytest.param({"etcd_ca_file": "/nonexistent/ca"}, "not a readable file", id="ca"),
        pytest.param(
            {"store": "etcd", "etcd_endpoints": ["e:2379"], "host": "0.0.0.0"},
            "give an advertise_url",
            id="wildcard-unadvertised",
        ),
        pytest.param({"advertise_url": "c1:7600"}, "must be an http", id="advertise-url"),
    ],
)
def test_bad_etcd_settings_are_refused(settings: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        CoordinatorConfig(**TOKENS, **settings)


def test_leader_settings_have_defaults_and_pass_through() -> None:
    assert CoordinatorConfig(**TOKENS).leader_ttl_seconds == 5
    config = CoordinatorConfig(
        **TOKENS,
        store="etcd",
        etcd_endpoints=["e:2379"],
        host="0.0.0.0",
        allow_insecure_http=True,
        advertise_url="http://c1.example:7600",
        leader_ttl_seconds=10,
    )
    assert (config.advertise_url, config.leader_ttl_seconds) == ("http://c1.example:7600", 10)


def test_a_coordinator_whose_etcd_does_not_answer_says_so(tmp_path: Path) -> None:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("ALLOT_")}
    environment["ALLOT_COORDINATOR_API_TOKENS"] = TOKENS["api_tokens"][0]
    environment["ALLOT_COORDINATOR_JOIN_TOKEN"] = TOKENS["join_token"]
    result = subprocess.run(
        [COORDINATOR, f"--data-dir={tmp_path}", "--port=0", "--store=etcd",
         "--etcd-endpoints=127.0.0.1:1", "--etcd-timeout-seconds=0.5"],
        env=environment,
        capture_output=True,
        text=True,
        timeout=60,
    )  # fmt: skip

    assert result.returncode == 1
    assert "cannot open the store" in result.stdout + result.stderr
    assert "no etcd endpoint answers" in result.stdout + result.stderr
