"""Real allot processes for end-to-end tests: each logs to a file that the test reads.

coordinator = Service.coordinator(tmp_path, port=0)
url = coordinator.wait_for(r"coordinator listening url=(\\S+)").group(1)
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

BIN = Path(sys.executable).parent
JOIN_TOKEN = "e2e-join-token-0123456789abcdef"
API_TOKEN = "e2e-api-token-0123456789abcdef"
LEASE_SECONDS = 1.5
HEARTBEAT_SECONDS = 0.3


class Service:
    def __init__(self, name: str, argv: list[str], env: dict[str, str], log: Path) -> None:
        self.name = name
        self.argv = argv
        self.env = env
        self.log = log
        self.process: subprocess.Popen[bytes] | None = None
        # Where this run's lines begin: a restarted service appends to the same log, and
        # its waits must not match what the previous run logged.
        self.log_start = 0

    @classmethod
    def coordinator(
        cls,
        workdir: Path,
        *,
        port: int = 0,
        toml: str = "",
        args: tuple[str, ...] = (),
        lease_seconds: float = LEASE_SECONDS,
        heartbeat_seconds: float = HEARTBEAT_SECONDS,
    ) -> Service:
        """A coordinator on loopback; ``toml`` is its config file (e.g. [[resources]]),
        ``args`` more of its flags (e.g. the etcd store's)."""
        env = {
            "ALLOT_COORDINATOR_JOIN_TOKEN": JOIN_TOKEN,
            "ALLOT_COORDINATOR_API_TOKENS": API_TOKEN,
        }
        argv = [
            str(BIN / "allot-coordinator"),
            f"--data-dir={workdir / 'data'}",
            f"--port={port}",
            f"--lease-seconds={lease_seconds}",
            f"--heartbeat-seconds={heartbeat_seconds}",
            *args,
        ]
        if toml:
            (workdir / "coordinator.toml").write_text(toml)
            argv.append(f"--config={workdir / 'coordinator.toml'}")
        return cls("coordinator", argv, env, workdir / "coordinator.log")

    @classmethod
    def agent(
        cls,
        workdir: Path,
        server: str,
        node: str,
        *,
        token: str = JOIN_TOKEN,
        args: tuple[str, ...] = (),
    ) -> Service:
        """An agent of this host as node ``node``; ``args`` are more of its flags."""
        argv = [
            str(BIN / "allot-agent"),
            "run",
            f"--server={server}",
            f"--node-name={node}",
            "--backoff-initial-seconds=0.1",
            "--backoff-max-seconds=0.5",
            f"--state-dir={workdir}",
            "--stop-timeout-seconds=1",
            # A port of its own, read back from the log (``metrics_url``): several agents
            # of this host run side by side, where the default 7601 would be taken.
            "--metrics-address=127.0.0.1:0",
            *args,
        ]
        return cls("agent", argv, {"ALLOT_AGENT_JOIN_TOKEN": token}, workdir / f"agent-{node}.log")

    def start(self) -> Service:
        self.log_start = len(self.text())
        handle = self.log.open("ab")
        environment = {k: v for k, v in os.environ.items() if not k.startswith("ALLOT_")}
        self.process = subprocess.Popen(
            self.argv, env=environment | self.env, stdout=handle, stderr=subprocess.STDOUT
        )
        handle.close()
        return self

    def kill9(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=10)

    def stop(self) -> int:
        """SIGTERM and wait: the exit status of a clean shutdown."""
        assert self.process is not None
        if self.process.poll() is None:
            self.process.terminate()
        return self.process.wait(timeout=15)

    def metrics_url(self) -> str:
        """Where this agent serves /metrics, once it says so."""
        return self.wait_for(r"metrics listening url=(\S+)").group(1)

    def text(self) -> str:
        return self.log.read_text() if self.log.exists() else ""

    def wait_for(
        self,
        pattern: str,
        *,
        timeout: float = 30.0,  # a coordinator's start took over 15 s at load 14
        after: int | None = None,
        from_children: bool = False,
    ) -> re.Match[str]:
        """The first match of ``pattern`` in the log at or after offset ``after`` (by
        default, where this run of the service began). ``from_children``: the service has
        exited on purpose, and what is awaited is written by a process it started."""
        deadline = time.monotonic() + timeout
        start = self.log_start if after is None else after
        while True:
            match = re.compile(pattern).search(self.text(), start)
            if match is not None:
                return match
            exited = self.process is not None and self.process.poll() is not None
            if exited and not from_children:
                assert self.process is not None
                raise AssertionError(
                    f"{self.name} exited ({self.process.returncode}):\n{self.text()}"
                )
            if time.monotonic() > deadline:
                raise AssertionError(f"{self.name} never logged {pattern!r}:\n{self.text()}")
            time.sleep(0.05)


def free_port() -> int:
    """A loopback port nothing listens on now: to restart a coordinator at the same URL."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def allotctl(server: str, *args: str, token: str = API_TOKEN) -> subprocess.CompletedProcess[str]:
    environment = {k: v for k, v in os.environ.items() if not k.startswith("ALLOT_")}
    return subprocess.run(
        [str(BIN / "allotctl"), "--server", server, "--token", token, *args],
        env=environment,
        capture_output=True,
        text=True,
        timeout=30,
    )


def api(server: str, path: str, body: object | None = None, method: str | None = None) -> Any:
    """GET (or POST ``body`` as JSON to) the API with the test's token; the decoded answer."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        server + path,
        data=data,
        headers={"Authorization": f"Bearer {API_TOKEN}", "Content-Type": "application/json"},
        method=method,
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())


def nodes_json(server: str) -> dict[str, dict[str, Any]]:
    """Each node's record, by name, as ``allotctl nodes --json`` prints them."""
    result = allotctl(server, "nodes", "--json")
    assert result.returncode == 0, result.stderr
    nodes: list[dict[str, Any]] = json.loads(result.stdout)["nodes"]
    return {node["name"]: node for node in nodes}


def wait_for_node_state(
    server: str, node: str, state: str, timeout: float = 15.0
) -> dict[str, Any]:
    deadline = time.monotonic() + timeout
    while True:
        record = nodes_json(server).get(node)
        if record is not None and record["state"] == state:
            return record
        if time.monotonic() > deadline:
            raise AssertionError(f"{node} never became {state}; last seen: {record}")
        time.sleep(0.1)
