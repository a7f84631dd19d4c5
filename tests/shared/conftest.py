"""Fixtures for the shared package's tests."""

from __future__ import annotations

import io

import pytest

from shared.logs import configure


@pytest.fixture
def allot_log(restore_allot_logger: None) -> io.StringIO:
    """Everything allot logs during the test, one journal-style line per event."""
    stream = io.StringIO()
    configure("debug", stream=stream, journal=True)
    return stream
