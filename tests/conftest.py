"""Settings and fixtures for the whole test suite."""

from __future__ import annotations

import logging
import os
from collections.abc import Iterator

import pytest
from hypothesis import settings

from tests.etcd_cluster import HOW_TO_FIX as ETCD_HOW_TO_FIX
from tests.etcd_cluster import OPT_OUT as ETCD_OPT_OUT
from tests.etcd_cluster import EtcdCluster, EtcdUnavailable, etcd_missing

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


@pytest.fixture(scope="session")
def etcd_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EtcdCluster]:
    """A real 3-member etcd cluster for the whole session (started once: about 2 s)."""
    if os.environ.get(ETCD_OPT_OUT) == "1":
        pytest.skip(f"{ETCD_OPT_OUT}=1: etcd tests skipped on request")
    missing = etcd_missing()
    if missing:
        pytest.fail(f"{missing}; {ETCD_HOW_TO_FIX}", pytrace=False)
    cluster = EtcdCluster(tmp_path_factory.mktemp("etcd"))
    try:
        cluster.start()
    except EtcdUnavailable as error:
        cluster.stop()
        pytest.fail(f"{error}; {ETCD_HOW_TO_FIX}", pytrace=False)
    yield cluster
    cluster.stop()
