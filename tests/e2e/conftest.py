"""Fixtures of the end-to-end tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

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
