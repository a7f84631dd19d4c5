"""Settings and fixtures for the whole test suite."""

from __future__ import annotations

import logging
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import settings

from bench.etcd_cluster import MAX_TXN_OPS, EtcdCluster, EtcdUnavailable, etcd_missing
from tests.beside import end_runs, record, run_groups_beside
from tests.quiet import is_quiet, told, wait_for_turn

# No per-example deadline: on a loaded two-core CI machine a slow example is not a
# failure (speed is measured by bench/, never asserted in tests). A failing example is
# printed with the blob that reproduces it.
settings.register_profile("allot", deadline=None, print_blob=True)
settings.load_profile("allot")

# etcd is part of the test environment: when it is missing or does not start, the tests
# that need it fail and say why; they are skipped only when a person asks for it.
ETCD_OPT_OUT = "ALLOT_SKIP_ETCD_TESTS"
ETCD_HOW_TO_FIX = (
    "run scripts/provision (as root it installs etcd-server), or set"
    f" {ETCD_OPT_OUT}=1 to skip the etcd tests on purpose"
)
SMALL_TXN_OPS = 128  # etcd's own default --max-txn-ops


def pytest_configure(config: pytest.Config) -> None:
    """No test reads this machine's allotctl config (~/.config/allot) or a context chosen
    in the shell that started pytest: allotctl, in-process or a subprocess of a test,
    finds a config file that does not exist. tests/allotctl gives each test its own."""
    os.environ.pop("ALLOT_CONTEXT", None)
    missing = Path(tempfile.gettempdir()) / f"allot-tests-{os.getpid()}" / "no-config.toml"
    os.environ["ALLOT_CONFIG"] = str(missing)


@pytest.hookimpl(wrapper=True)
def pytest_collection_modifyitems(
    config: pytest.Config, items: list[pytest.Item]
) -> Iterator[None]:
    """After every other hook has ordered and deselected the items: the slow groups in runs
    of their own beside this one (tests/beside.py), the quiet tests last (tests/quiet.py)."""
    yield
    run_groups_beside(items, config)


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    record(report)  # in a run beside a session, for that session (tests/beside.py)


def pytest_sessionfinish(session: pytest.Session) -> None:
    end_runs(session.config.pluginmanager.get_plugin("terminalreporter"))


@pytest.hookimpl(trylast=True)  # after its fixtures are set up: they may be slow
def pytest_runtest_setup(item: pytest.Item) -> None:
    if is_quiet(item):
        wait_for_turn()


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    for line in told():  # the quiet tests' figures (tests/quiet.py)
        terminalreporter.write_line(line)


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
    yield from _started_etcd_cluster(tmp_path_factory.mktemp("etcd"))


@pytest.fixture(scope="session")
def quiet_etcd_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EtcdCluster]:
    """A second cluster, for the store's conformance suite alone: its tests count the
    cluster's revisions, so nothing else may write there meanwhile, and on the shared
    cluster something may (a lease another test left behind expiring, say, deletes its
    keys)."""
    yield from _started_etcd_cluster(tmp_path_factory.mktemp("etcd-quiet"))


@pytest.fixture(scope="session")
def small_txn_etcd_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EtcdCluster]:
    """One member with etcd's default --max-txn-ops (128): commits larger than that are
    made in steps, and a test of them need not write thousands of keys."""
    root = tmp_path_factory.mktemp("etcd-small-txn")
    yield from _started_etcd_cluster(root, size=1, max_txn_ops=SMALL_TXN_OPS)


def _started_etcd_cluster(
    root: Path, *, size: int = 3, max_txn_ops: int = MAX_TXN_OPS
) -> Iterator[EtcdCluster]:
    if os.environ.get(ETCD_OPT_OUT) == "1":
        pytest.skip(f"{ETCD_OPT_OUT}=1: etcd tests skipped on request")
    missing = etcd_missing()
    if missing:
        pytest.fail(f"{missing}; {ETCD_HOW_TO_FIX}", pytrace=False)
    cluster = EtcdCluster(root, size, max_txn_ops=max_txn_ops)
    try:
        cluster.start()
    except EtcdUnavailable as error:
        cluster.stop()
        pytest.fail(f"{error}; {ETCD_HOW_TO_FIX}", pytrace=False)
    yield cluster
    cluster.stop()
