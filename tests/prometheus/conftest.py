"""The real Docker engine of tests/docker, for the cluster Prometheus scrapes."""

from tests.docker.conftest import docker_client as docker_client
