"""The real Docker engine for the tests that enforce limits.

``make test`` provisions the engine and the image (scripts/provision). When no
engine answers these tests fail, saying so; they are skipped only when a person asks for
it with ALLOT_SKIP_DOCKER_TESTS=1.
"""

from __future__ import annotations

import logging
import os
import uuid
from collections.abc import Iterator

import docker
import pytest
from docker.errors import DockerException, ImageNotFound

IMAGE = "allot/busybox:test"
OPT_OUT = "ALLOT_SKIP_DOCKER_TESTS"
HOW_TO_FIX = (
    "run scripts/provision (as root it installs docker.io and busybox-static, starts"
    f" dockerd and builds {IMAGE}), or set {OPT_OUT}=1 to skip the Docker tests on purpose"
)


@pytest.fixture(scope="session")
def docker_client() -> Iterator[docker.DockerClient]:
    if os.environ.get(OPT_OUT) == "1":
        pytest.skip(f"{OPT_OUT}=1: Docker tests skipped on request")
    try:
        client = docker.from_env(timeout=60)
        client.ping()
    except DockerException as error:
        pytest.fail(f"no Docker engine answers ({error}); {HOW_TO_FIX}", pytrace=False)
    try:
        client.images.get(IMAGE)
    except ImageNotFound:
        pytest.fail(f"the test image {IMAGE} is missing; {HOW_TO_FIX}", pytrace=False)
    yield client
    client.close()


@pytest.fixture
def node(docker_client: docker.DockerClient) -> Iterator[str]:
    """A node name of this test's own, and none of its containers left behind."""
    name = f"test-{uuid.uuid4().hex[:10]}"
    yield name
    for found in docker_client.api.containers(all=True, filters={"label": [f"allot.node={name}"]}):
        docker_client.api.remove_container(found["Id"], force=True)


@pytest.fixture
def runtime_log(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    """The agent runtime's log lines from INFO up, for ``runtimes.logged``."""
    logging.getLogger("allot").propagate = True
    caplog.set_level(logging.INFO, logger="allot.agent.runtime")
    return caplog
