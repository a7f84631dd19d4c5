"""Fixtures of the dashboard's tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from selenium import webdriver

# The real Docker engine, as the Docker tests have it (skipped, or failing, alike).
from tests.docker.conftest import docker_client  # noqa: F401
from tests.ui.browser import chromium


@pytest.fixture
def browser() -> Iterator[webdriver.Chrome]:
    yield from chromium()
