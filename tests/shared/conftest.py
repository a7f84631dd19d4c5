"""Fixtures for the shared package's tests."""

from __future__ import annotations

import io
import logging
from collections.abc import Iterator

import pytest

from shared.logs import configure


@pytest.fixture
def restore_allot_logger() -> Iterator[None]:
    """``configure()`` rewires the "allot" logger; put it back as it was afterwards."""
    logger = logging.getLogger("allot")
    saved = (list(logger.handlers), logger.level, logger.propagate)
    try:
        yield
    finally:
        logger.handlers[:] = saved[0]
        logger.setLevel(saved[1])
        logger.propagate = saved[2]


@pytest.fixture
def allot_log(restore_allot_logger: None) -> io.StringIO:
    """Everything allot logs during the test, one journal-style line per event."""
    stream = io.StringIO()
    configure("debug", stream=stream, journal=True)
    return stream
