"""Stopping and starting this host's Docker engine under a test, when that can be done
safely: as root, with the engine run by systemd or as a plain ``dockerd`` process whose
command line can be run again (as scripts/provision starts it)."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from pathlib import Path

import docker
import requests
from docker.errors import DockerException

WAIT_SECONDS = 60.0
_restarted: list[subprocess.Popen[bytes]] = []  # engines this process started, kept running


class EngineControl:
    def __init__(self, client: docker.DockerClient, log: Path) -> None:
        self.client = client
        self.log = log
        self._argv: list[str] = []

    @staticmethod
    def unsafe_reason() -> str:
        """Why the engine cannot be restarted here; "" when it can."""
        if os.geteuid() != 0:
            return "only root can stop and start the Docker engine"
        if os.environ.get("DOCKER_HOST", "unix://").split("://")[0] not in ("unix", ""):
            return "the Docker engine is not on this host (DOCKER_HOST)"
        if _systemd_runs_docker() or _dockerd_pids():
            return ""
        return "no dockerd process of this host to restart"

    def stop(self) -> None:
        if _systemd_runs_docker():
            subprocess.run(["systemctl", "stop", "docker.socket", "docker"], check=True)
            return
        (pid,) = _dockerd_pids()
        self._argv = Path(f"/proc/{pid}/cmdline").read_bytes().rstrip(b"\0").decode().split("\0")
        os.kill(pid, 15)
        deadline = time.monotonic() + WAIT_SECONDS
        while _alive(pid):
            if time.monotonic() > deadline:
                raise AssertionError(f"dockerd {pid} did not stop within {WAIT_SECONDS:g}s")
            time.sleep(0.1)

    def start(self) -> None:
        """Start the engine again and wait until it answers."""
        if self.answers():
            return
        if self._argv:
            with self.log.open("ab") as output:
                engine = subprocess.Popen(
                    self._argv, stdout=output, stderr=subprocess.STDOUT, start_new_session=True
                )
            _restarted.append(engine)
        else:
            subprocess.run(["systemctl", "start", "docker"], check=True)
        deadline = time.monotonic() + WAIT_SECONDS
        while not self.answers():
            if time.monotonic() > deadline:
                raise AssertionError(f"the Docker engine did not come back; see {self.log}")
            time.sleep(0.2)

    def answers(self) -> bool:
        try:
            self.client.ping()
        except (DockerException, requests.RequestException):
            return False
        return True


def _systemd_runs_docker() -> bool:
    if not Path("/run/systemd/system").is_dir() or shutil.which("systemctl") is None:
        return False
    active = subprocess.run(["systemctl", "is-active", "--quiet", "docker"], check=False)
    return active.returncode == 0


def _dockerd_pids() -> list[int]:
    found = subprocess.run(["pgrep", "-x", "dockerd"], capture_output=True, text=True, check=False)
    return [int(pid) for pid in found.stdout.split() if _alive(int(pid))]


def _alive(pid: int) -> bool:
    """The process exists and has not exited. An engine that another test run started
    and then stopped stays a zombie until that run reaps it; it is not the engine."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"  # the state follows "(name)"
