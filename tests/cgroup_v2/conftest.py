"""The cgroup v2 host: one virtual machine for the whole test run (scripts/cgroup2-host).

``make test`` runs these tests; the first run on a machine builds the VM's image (as root,
about two minutes), and every run boots it once (about a minute under emulation). When
the VM cannot be provided the tests fail, saying why; they are skipped only when a person
asks for it with ALLOT_SKIP_CGROUP_V2_TESTS=1.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from tests.cgroup_v2.guest import SCRIPT, Guest, GuestUnavailable

OPT_OUT = "ALLOT_SKIP_CGROUP_V2_TESTS"


@pytest.fixture(scope="session")
def guest(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Guest]:
    if os.environ.get(OPT_OUT) == "1":
        pytest.skip(f"{OPT_OUT}=1: cgroup v2 tests skipped on request")
    try:
        booted = Guest.boot(tmp_path_factory.mktemp("cgroup2-vm"))
    except GuestUnavailable as error:
        pytest.fail(
            f"the cgroup v2 VM could not be provided:\n{error}\n(see {SCRIPT}; "
            f"set {OPT_OUT}=1 to skip these tests on purpose)",
            pytrace=False,
        )
    try:
        yield booted
    finally:
        booted.stop()
