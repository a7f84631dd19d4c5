"""Settings and fixtures for the whole test suite."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest
from hypothesis import settings

# No per-example deadline: on a loaded two-core CI machine a slow example is not a
# failure (speed is measured by bench/, never asserted in tests). A failing example is
# printed with the blob that reproduces it.
settings.register_profile("allot", deadline=None, print_blob=True)
settings.load_profile("allot")


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
