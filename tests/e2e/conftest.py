"""Fixtures of the end-to-end tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from coordinator.store.etcd_link import EtcdSettings
from tests.coordinator.store_engines import ENGINES, etcd_settings
from tests.e2e.processes import Service


@pytest.fixture
def services() -> Iterator[list[Service]]:
    """Every service a test starts; whatever is still running is killed afterwards."""
    started: list[Service] = []
    yield started
    for service in started:
        if service.process is not None and service.process.poll() is None:
            service.process.kill()
            service.process.wait(timeout=10)


def etcd_flags(settings: EtcdSettings) -> tuple[str, ...]:
    """A coordinator's flags for the etcd store of ``settings``."""
    return (
        "--store=etcd",
        f"--etcd-endpoints={','.join(settings.endpoints)}",
        f"--etcd-prefix={settings.prefix}",
    )


@pytest.fixture(params=ENGINES)
def store_flags(request: pytest.FixtureRequest) -> tuple[str, ...]:
    """Each store engine in turn, as the coordinator's flags (SQLite: none, the default)."""
    if request.param == "sqlite":
        return ()
    return etcd_flags(etcd_settings(request.getfixturevalue("etcd_cluster")))
