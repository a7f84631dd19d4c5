"""A Docker engine of one test's own, to stop and start under an agent.

Stopping the host's engine would pull it from under everything that runs beside the
test: make test runs the end-to-end tests' agents at the same time, and CI saw one of
them degraded ("the Docker engine does not answer") while this engine was down. So the
test runs a second ``dockerd`` with its own socket, data and exec roots (and so its own
containerd), and loads the test image into it from the host's engine. It runs in a
network namespace of its own: a second engine on the host's network takes over the
host's ``docker0`` (one started with ``--bridge=none`` deleted it, and every container
of the host's engine then failed to start). Starting one takes about a second.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType

import docker
import requests
from docker.errors import DockerException

from agent.runtime.docker_engine import API_VERSION

WAIT_SECONDS = 60.0


class PrivateEngine:
    def __init__(self, log: Path) -> None:
        if os.geteuid() != 0:
            raise AssertionError("a Docker engine of the test's own needs root (dockerd)")
        dockerd = shutil.which("dockerd")
        if dockerd is None:
            raise AssertionError("dockerd is not installed; run scripts/provision")
        # A short path of its own: a unix socket's path is at most 107 bytes.
        self.root = Path(tempfile.mkdtemp(prefix="allot-engine-"))
        self.address = f"unix://{self.root}/docker.sock"
        self.log = log
        self._argv = [
            "unshare",
            "--net",
            "--",
            dockerd,
            f"--host={self.address}",
            f"--data-root={self.root}/data",
            f"--exec-root={self.root}/exec",
            f"--pidfile={self.root}/docker.pid",
        ]
        self._process: subprocess.Popen[bytes] | None = None
        # The agent's API version: a client left to find it out would ask the engine now.
        self.client = docker.DockerClient(base_url=self.address, version=API_VERSION, timeout=60)

    def __enter__(self) -> PrivateEngine:
        self.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.close()

    def load(self, image: str, source: docker.DockerClient) -> None:
        """Copy ``image`` from the host's engine ``source`` into this one."""
        self.client.images.load(b"".join(source.images.get(image).save(named=True)))

    def start(self) -> None:
        """Start the engine and wait until it answers."""
        if self._process is not None and self._process.poll() is None:
            return
        with self.log.open("ab") as output:
            self._process = subprocess.Popen(
                self._argv, stdout=output, stderr=subprocess.STDOUT, start_new_session=True
            )
        deadline = time.monotonic() + WAIT_SECONDS
        while not self.answers():
            if self._process.poll() is not None or time.monotonic() > deadline:
                raise AssertionError(f"the test's Docker engine did not start; see {self.log}")
            time.sleep(0.1)

    def stop(self) -> None:
        """Stop the engine as a shutdown does (SIGTERM) and wait until it has exited."""
        if self._process is None:
            return
        self._process.terminate()
        try:
            self._process.wait(WAIT_SECONDS)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
            raise AssertionError(
                f"the test's Docker engine did not stop within {WAIT_SECONDS:g}s"
            ) from None
        self._detach_leftover_mounts()

    def answers(self) -> bool:
        try:
            self.client.ping()
        except (DockerException, requests.RequestException):
            return False
        return True

    def close(self) -> None:
        """Remove the engine's containers, stop it and remove everything it kept."""
        try:
            if self.answers():
                for found in self.client.api.containers(all=True):
                    self.client.api.remove_container(found["Id"], force=True)
            self.stop()
        finally:
            self.client.close()
            self._detach_leftover_mounts()
            shutil.rmtree(self.root)

    def _detach_leftover_mounts(self) -> None:
        """Lazily unmount what the stopped engine left mounted under its root.

        CI saw the engine, stopped with containers running, leave their overlays and
        network namespaces mounted. The engine started again mounted them anew, and then
        could not remove one of those containers: "failed to remove root filesystem: ...
        merged: device or resource busy", since the old mount still sat on the directory.
        """
        # A path shows only its topmost mount: an overlay under the data root's own bind
        # mount hides one the engine left before it, so unmount until nothing is left.
        left = _mount_points_under(self.root)
        while left:
            for mount_point in sorted(left, key=len, reverse=True):
                subprocess.run(["umount", "--lazy", mount_point], check=False, capture_output=True)
            still = _mount_points_under(self.root)
            if len(still) >= len(left):
                raise AssertionError(f"could not unmount what the test's engine left: {still}")
            left = still


def _mount_points_under(root: Path) -> list[str]:
    """The mount points below ``root`` in this process's mount namespace."""
    prefix = f"{root}/"
    with open("/proc/self/mountinfo", encoding="utf-8") as table:
        # the fifth field is the mount point, with spaces and the like escaped as octal
        points = [_unescape(line.split()[4]) for line in table]
    return [point for point in points if point.startswith(prefix)]


def _unescape(field: str) -> str:
    return re.sub(r"\\([0-7]{3})", lambda octal: chr(int(octal.group(1), 8)), field)
